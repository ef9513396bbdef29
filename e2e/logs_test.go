package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestTenantDelete_ForcedLogsOneLine: a forced delete drops the
// deliveries in flight, which is what force asks for and no error: the
// node logs one info line for the delete (who asked, with force) and one
// for its purge's task as it ends, not an error per attempt whose outcome
// finds its delivery gone.
func TestTenantDelete_ForcedLogsOneLine(t *testing.T) {
	t.Parallel()
	in, held, release := startHeld(t)
	defer release()
	held.setSecret(in.addTenant("gone", held.srv.URL))
	const n = 3
	for i := range n {
		if resp, raw := in.postEventTo("gone", fmt.Sprintf(`{"type":"invoice.paid","data":{"n":%d}}`, i)); resp.StatusCode != 202 {
			t.Fatalf("ingest %d: %d %s", i, resp.StatusCode, raw)
		}
	}
	waitFor(t, "the attempts to hang", func() bool { return len(held.got()) >= n })
	in.mustCall(202, "DELETE", "/v1/tenants/gone?force=true", nil, nil)
	// Once the purge is done (and logged), the attempts' outcomes find
	// nothing to record.
	waitFor(t, "the purge", func() bool {
		return strings.Contains(in.logs.String(), `msg="task finished"`) && strings.Contains(in.logs.String(), `kind=tenant.purge tenant=gone state=succeeded`)
	})
	release()
	waitFor(t, "the attempts to end", func() bool {
		m, err := scrapeMetrics(in.base)
		return err == nil && m["webhookd_inflight_attempts"] == 0
	})

	var about []string
	for _, line := range strings.Split(in.logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			t.Errorf("logged: %s", line)
		}
		if strings.Contains(line, "level=INFO") && strings.Contains(line, "tenant=gone") {
			about = append(about, line)
		}
		if strings.Contains(line, "level=INFO") && strings.Contains(line, "dlv_") {
			t.Errorf("an info line per delivery: %s", line)
		}
	}
	if len(about) != 2 || !strings.Contains(about[0], `msg="tenant deleted"`) || !strings.Contains(about[0], "force=true") || !strings.Contains(about[1], `msg="task finished"`) {
		t.Errorf("%d info lines name the deleted tenant, want the delete's and its purge's end:\n%s", len(about), strings.Join(about, "\n"))
	}
}
