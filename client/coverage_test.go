package client_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/webhookd/webhookd/client"
)

// operations maps each operationId of the API's document to the client
// method that calls it; notCalled says why an operation has none.
var (
	operations = map[string]string{
		"health": "Health", "ready": "Ready",
		"listTenants": "Tenants", "putTenant": "PutTenant", "getTenant": "Tenant", "deleteTenant": "DeleteTenant",
		"listEventTypes": "EventTypes", "putEventType": "PutEventType", "deleteEventType": "DeleteEventType",
		"listRetryPolicies": "RetryPolicies",
		"createEndpoint":    "CreateEndpoint", "listEndpoints": "Endpoints", "getEndpoint": "Endpoint",
		"updateEndpoint": "UpdateEndpoint", "deleteEndpoint": "DeleteEndpoint",
		"rotateSecret": "RotateSecret", "revokeSecret": "RevokeSecret", "revealSecret": "RevealSecret", "verifyEndpoint": "VerifyEndpoint",
		"sendTestEvent": "SendTestEvent", "backfillEndpoint": "Backfill",
		"ingest": "Ingest", "listEvents": "Feed", "getEvent": "Event",
		"listDeliveries": "Deliveries", "getDelivery": "Delivery", "replayDelivery": "Replay", "skipDelivery": "Skip",
		"listDeadLetters": "DeadLetters", "replayDeadLetters": "ReplayDeadLetters",
		"report": "Report", "reportAll": "ReportAll",
		"issueAccessToken": "IssueAccessToken", "listAccessTokens": "AccessTokens", "revokeAccessToken": "RevokeAccessToken",
		"createPortalLink":          "CreatePortalLink",
		"backup":                    "Backup",
		"createOperationalEndpoint": "CreateOperationalEndpoint", "listOperationalEndpoints": "OperationalEndpoints",
		"getOperationalEndpoint": "OperationalEndpoint", "updateOperationalEndpoint": "UpdateOperationalEndpoint",
		"deleteOperationalEndpoint": "DeleteOperationalEndpoint", "rotateOperationalSecret": "RotateOperationalSecret",
		"listTasks": "Tasks", "getTask": "Task", "listTenantTasks": "TenantTasks", "getTenantTask": "TenantTask",
	}
	notCalled = map[string]string{
		"metrics":              "Prometheus scrapes it, in its own text format",
		"openapi":              "the document is for generators and validators, not for calls",
		"webhook":              "webhookd sends it; the receiver's side is package verify",
		"endpointVerification": "webhookd sends it; verify.ChallengeResponse answers it",
		"opEndpointCreated":    opEvent, "opEndpointUpdated": opEvent, "opEndpointDeleted": opEvent,
		"opEndpointDisabled": opEvent, "opEndpointEnabled": opEvent, "opEndpointFailing": opEvent,
		"opEndpointRecovered": opEvent, "opDeliveryDead": opEvent, "opTenantDeleted": opEvent, "opTaskFinished": opEvent,
	}
)

// opEvent is why an operational event's webhook has no client method.
const opEvent = "webhookd sends it to the operational endpoints; DecodeOperationalEvent reads its data"

// TestClient_CoversEveryOperation fails when the API's document has an
// operation the client has no method for (or a method named here is
// gone), so a new route cannot land without its client call.
func TestClient_CoversEveryOperation(t *testing.T) {
	raw, err := os.ReadFile("../httpapi/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths, Webhooks map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeFor[*client.Client]()
	seen := 0
	for _, items := range []map[string]map[string]json.RawMessage{doc.Paths, doc.Webhooks} {
		for path, item := range items {
			for method, op := range item {
				var o struct{ OperationID string }
				if json.Unmarshal(op, &o) != nil || o.OperationID == "" {
					continue // parameters, summary: not an operation
				}
				seen++
				name, ok := operations[o.OperationID]
				if !ok {
					if notCalled[o.OperationID] == "" {
						t.Errorf("%s %s (%s) has no client method: add one, and name it in operations", method, path, o.OperationID)
					}
					continue
				}
				if _, ok := typ.MethodByName(name); !ok {
					t.Errorf("%s %s (%s): client.%s does not exist", method, path, o.OperationID, name)
				}
			}
		}
	}
	if seen != len(operations)+len(notCalled) {
		t.Errorf("the document has %d operations, this test names %d: one it names is gone", seen, len(operations)+len(notCalled))
	}
}
