package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"time"
)

// Tenant-scoped access tokens. An admin issues one for one tenant; it
// acts on that tenant's routes only, expires, and can be revoked. Its
// holder is the tenant's own people (the web console, a support script),
// never the sender's app: it cannot ingest events, change the tenant or
// the catalogue, issue tokens or reach /v1/admin (httpapi decides which
// routes; see its security.go).
//
// The token itself is shown once, when it is issued: webhookd keeps only
// its SHA-256, so a copied database file holds no usable token. A request
// bearing one costs one read of the store (by hash), so a revocation or an
// expiry takes effect on the very next request.

// AccessTokenPrefix starts every tenant access token: "whk_t_" + base64url
// (no padding) of 32 random bytes, 49 characters in all. It tells a tenant
// token from an admin token ("whk_live_…", "whk_test_…") at a glance and
// lets httpapi skip the store for anything else.
const AccessTokenPrefix = "whk_t_"

// Access token lifetimes.
const (
	// DefaultAccessTokenTTL is the lifetime of a token issued without one
	// (and the default of [api] tenant_token_ttl).
	DefaultAccessTokenTTL = 24 * time.Hour
	// MaxAccessTokenTTL is the longest lifetime a token may have: 30 days.
	MaxAccessTokenTTL = 30 * 24 * time.Hour
)

// AccessToken is what webhookd keeps of a tenant access token: never the
// token, only facts about it (the store keys it by the token's SHA-256).
type AccessToken struct {
	ID       string `json:"id"` // "tok_…": how the token is listed, revoked and named in replays
	TenantID string `json:"tenant"`
	// Environment is the tenant's, copied when the token is issued: the
	// token's requests are callers of that environment.
	Environment Environment `json:"environment"`
	Created     time.Time   `json:"created"`
	Expires     time.Time   `json:"expires"`
	// Revoked is when the token was revoked; zero while it is not.
	Revoked time.Time `json:"revoked,omitzero"`
	// Purpose is "" for a token issued by POST …/access-tokens; a portal
	// link's is PurposePortalLink (never a bearer token: it only opens a
	// console session, once) and the session's PurposePortalSession
	// (portal.go).
	Purpose string `json:"purpose,omitempty"`
	// ReturnURL is a portal link's: where the console's "back" link
	// goes, "" for none.
	ReturnURL string `json:"return_url,omitempty"`
}

// Active reports whether t is accepted at now: not revoked, not expired.
func (t AccessToken) Active(now time.Time) bool {
	return t.Revoked.IsZero() && now.Before(t.Expires)
}

// Principal is the name a token's actions are recorded under (a replay's
// By): "token tok_…". The token value never is.
func (t AccessToken) Principal() string { return "token " + t.ID }

// TokenStore is the part of the Store behind access tokens.
type TokenStore interface {
	// CreateAccessToken stores t under hash, the SHA-256 of the token;
	// CodeTenantNotFound when t.TenantID does not exist.
	CreateAccessToken(ctx context.Context, hash [sha256.Size]byte, t AccessToken) error
	// AccessTokenByHash returns the token whose SHA-256 is hash, and
	// whether there is one (revoked and expired tokens are returned too,
	// until they are pruned).
	AccessTokenByHash(ctx context.Context, hash [sha256.Size]byte) (AccessToken, bool, error)
	// AccessTokens lists tenant's tokens in the order they were issued.
	AccessTokens(ctx context.Context, tenant string) ([]AccessToken, error)
	// RevokeAccessToken sets Revoked to at on token id of tenant, unless it
	// is revoked already, and returns it as stored and whether this call
	// revoked it: of concurrent calls, exactly one does (RedeemPortalLink
	// counts on that). CodeNotFound ("id") when tenant has no such token.
	RevokeAccessToken(ctx context.Context, tenant, id string, at time.Time) (AccessToken, bool, error)
}

// AccessTokenInput is the body of POST /v1/tenants/{tenant}/access-tokens.
type AccessTokenInput struct {
	// TTL is the token's lifetime in Go's duration syntax ("24h", "90m");
	// "": the default the caller passes. At most MaxAccessTokenTTL.
	TTL string `json:"ttl"`
	// TTLSeconds is TTL as a whole number of seconds; give one or the
	// other.
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
}

// HashAccessToken returns the SHA-256 a token is kept and looked up by.
func HashAccessToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// newAccessTokenValue returns a new token: AccessTokenPrefix + base64url of
// 32 random bytes.
func newAccessTokenValue() string {
	var b [32]byte
	// crypto/rand.Read never returns an error: since Go 1.24 it fills b
	// or crashes the program irrecoverably, so no error is checked after
	// it anywhere in webhookd.
	rand.Read(b[:])
	return AccessTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// IssueAccessToken makes a token for tenant that lives in.TTL (defaultTTL
// when in.TTL is empty; zero defaultTTL: DefaultAccessTokenTTL). It returns
// the stored facts and the token itself, which nothing shows again.
func (s *Service) IssueAccessToken(ctx context.Context, tenant string, in AccessTokenInput, defaultTTL time.Duration) (AccessToken, string, error) {
	ttl := defaultTTL
	if ttl <= 0 {
		ttl = DefaultAccessTokenTTL
	}
	d, field, given, err := durationInput("ttl", in.TTL, in.TTLSeconds, `"24h" or "90m"`)
	if err != nil {
		return AccessToken{}, "", err
	}
	if given {
		ttl = d
	}
	if ttl <= 0 || ttl > MaxAccessTokenTTL {
		return AccessToken{}, "", Errorf(CodeInvalidField, field, "ttl must be more than 0s and at most %s (30 days, 2592000 seconds)", "720h")
	}
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return AccessToken{}, "", err
	}
	return s.storeToken(ctx, AccessToken{TenantID: t.ID, Environment: t.Environment}, ttl)
}

// storeToken stores tok (its tenant, environment, purpose and return URL
// set) as a new token that lives ttl from now, and returns it with its
// value.
func (s *Service) storeToken(ctx context.Context, tok AccessToken, ttl time.Duration) (AccessToken, string, error) {
	now := s.now()
	tok.ID, tok.Created, tok.Expires = NewID("tok"), now, now.Add(ttl)
	value := newAccessTokenValue()
	if err := s.store.CreateAccessToken(ctx, HashAccessToken(value), tok); err != nil {
		return AccessToken{}, "", err
	}
	return tok, value, nil
}

// AccessTokens lists tenant's tokens, revoked and expired ones included
// until they are pruned, without their values (webhookd has none).
func (s *Service) AccessTokens(ctx context.Context, tenant string) ([]AccessToken, error) {
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return nil, err
	}
	return s.store.AccessTokens(ctx, tenant)
}

// RevokeAccessToken revokes token id of tenant. It takes effect at once:
// every request reads the token's record. Revoking a revoked token is not
// an error.
func (s *Service) RevokeAccessToken(ctx context.Context, tenant, id string) (AccessToken, error) {
	if !validID(id) || !strings.HasPrefix(id, "tok_") {
		return AccessToken{}, AccessTokenNotFound()
	}
	if _, err := s.Tenant(ctx, tenant); err != nil {
		return AccessToken{}, err
	}
	t, _, err := s.store.RevokeAccessToken(ctx, tenant, id, s.now())
	return t, err
}

// LookupAccessToken returns the active token whose value is token; a
// portal link is not one (it only opens a session, RedeemPortalLink). Any
// failure a client can cause — not a tenant token, unknown, revoked,
// expired — is the same CodeUnauthorized error, so an answer never says
// which.
func (s *Service) LookupAccessToken(ctx context.Context, token string) (AccessToken, error) {
	unauthorized := Errorf(CodeUnauthorized, "", "missing or invalid bearer token")
	if !strings.HasPrefix(token, AccessTokenPrefix) || len(token) > 128 {
		return AccessToken{}, unauthorized
	}
	t, ok, err := s.store.AccessTokenByHash(ctx, HashAccessToken(token))
	if err != nil {
		return AccessToken{}, err
	}
	if !ok || !t.Active(s.now()) || t.Purpose == PurposePortalLink {
		return AccessToken{}, unauthorized
	}
	return t, nil
}

// Tenants lists the customers' tenants by ID: GET /v1/tenants, the
// admin's tenant picker and the all-tenants report. A reserved tenant
// (OperatorTenant: an id no API request can name) is no customer, and
// is never listed.
func (s *Service) Tenants(ctx context.Context) ([]Tenant, error) {
	all, err := s.store.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(t Tenant) bool { return !validTenantID(t.ID) }), nil
}

// TenantsReport is the delivery report of every tenant and their total.
type TenantsReport struct {
	Tenants []Report `json:"tenants"`
	// Total sums the tenants' reports: the same counts over all of them,
	// its rate and checks recomputed from the sums.
	Total Report `json:"total"`
}

// ReportAll computes the report over the last n events (0:
// DefaultReportWindow) of each tenant Tenants lists, and their total.
// Each tenant is read in its own read transaction, one after the other,
// so the total is a sum of snapshots taken moments apart, not one
// snapshot.
func (s *Service) ReportAll(ctx context.Context, n int) (TenantsReport, error) {
	if n == 0 {
		n = DefaultReportWindow
	}
	if n < 1 || n > 100000 {
		return TenantsReport{}, Errorf(CodeInvalidField, "last", "last must be from 1 to 100000")
	}
	tenants, err := s.Tenants(ctx)
	if err != nil {
		return TenantsReport{}, err
	}
	out := TenantsReport{Tenants: make([]Report, 0, len(tenants))}
	for _, t := range tenants {
		r, err := s.Report(ctx, t.ID, n)
		if err != nil {
			return TenantsReport{}, err
		}
		out.Tenants = append(out.Tenants, r)
	}
	out.Total = SumReports(out.Tenants)
	return out, nil
}

// SumReports adds reports up: every count summed (so the buckets of the
// total sum to its deliveries when each report's do), the effective
// delivery rate and the target recomputed from the sums, and each check
// OK only if it is OK in every report (the notes name the tenants where
// it is not).
func SumReports(rs []Report) Report {
	total := Report{DeadByReason: map[string]int{}, Target: ReportTarget}
	checks := map[string]*ReportCheck{}
	var order []string
	for _, r := range rs {
		total.Events += r.Events
		total.Deliveries += r.Deliveries
		total.FirstAttemptSuccesses += r.FirstAttemptSuccesses
		total.RetrySuccesses += r.RetrySuccesses
		total.Pending += r.Pending
		total.Dead += r.Dead
		total.Waiting += r.Waiting
		total.Paused += r.Paused
		total.Blocking += r.Blocking
		total.Skipped += r.Skipped
		total.Replayed += r.Replayed
		total.DuplicateDeliveries += r.DuplicateDeliveries
		for reason, n := range r.DeadByReason {
			total.DeadByReason[reason] += n
		}
		for _, c := range r.Checks {
			tc, ok := checks[c.Name]
			if !ok {
				tc = &ReportCheck{Name: c.Name, OK: true}
				checks[c.Name] = tc
				order = append(order, c.Name)
			}
			if !c.OK {
				tc.OK = false
				note := c.Note
				if r.Tenant != "" {
					note = r.Tenant + ": " + note
				}
				if tc.Note != "" {
					note = tc.Note + "; " + note
				}
				tc.Note = note
			}
		}
	}
	if total.Deliveries > 0 {
		total.EffectiveDeliveryRate = float64(total.FirstAttemptSuccesses+total.RetrySuccesses) / float64(total.Deliveries)
	} else {
		total.EffectiveDeliveryRate = 1
	}
	total.MeetsTarget = total.EffectiveDeliveryRate >= total.Target
	total.Checks = []ReportCheck{}
	for _, name := range order {
		total.Checks = append(total.Checks, *checks[name])
	}
	return total
}
