package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/time/rate"

	"github.com/webhookd/webhookd/engine"
)

// TokenHashPrefix marks a configured token given by its hash: a token
// "sha256:<64 hex digits>" stands for the token whose SHA-256 that is, so a
// configuration file need not hold the token itself.
const TokenHashPrefix = "sha256:"

// credential is one accepted bearer token: only its SHA-256 is kept.
type credential struct {
	hash    [sha256.Size]byte
	env     engine.Environment
	limiter *rate.Limiter // ingest requests; nil: unlimited
}

// credentials returns the accepted tokens of opts: Tokens for the live
// environment, TestTokens for the test one, each with its own ingest rate
// limiter when IngestRate is set. Empty tokens are ignored.
func credentials(opts Options) []credential {
	var out []credential
	add := func(tokens []string, env engine.Environment) {
		for _, t := range tokens {
			if t == "" {
				continue
			}
			c := credential{hash: TokenHash(t), env: env}
			if opts.IngestRate > 0 && !math.IsInf(opts.IngestRate, 1) {
				burst := opts.IngestBurst
				if burst <= 0 {
					burst = max(1, int(math.Ceil(opts.IngestRate)))
				}
				c.limiter = rate.NewLimiter(rate.Limit(opts.IngestRate), burst)
			}
			out = append(out, c)
		}
	}
	add(opts.Tokens, engine.EnvironmentLive)
	add(opts.TestTokens, engine.EnvironmentTest)
	return out
}

// TokenHash returns the SHA-256 a token is kept as: of the token itself, or
// the hash it names when it is TokenHashPrefix + 64 hex digits.
func TokenHash(token string) [sha256.Size]byte {
	if h, ok := strings.CutPrefix(token, TokenHashPrefix); ok && len(h) == 2*sha256.Size {
		var sum [sha256.Size]byte
		if _, err := hex.Decode(sum[:], []byte(h)); err == nil {
			return sum
		}
	}
	return sha256.Sum256([]byte(token))
}

// bearerToken returns the token of an Authorization header "Bearer
// <token>", the scheme case-insensitive (RFC 9110).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate returns the configured credential (admin or test token)
// that token is. The token is hashed and compared in constant time with
// every configured hash, without stopping at a match, so the time taken
// says nothing about how much of a token was right or which token it was.
func (s *server) authenticate(token string) (*credential, bool) {
	sum := sha256.Sum256([]byte(token))
	var found *credential
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], s.tokens[i].hash[:]) == 1 {
			found = &s.tokens[i]
		}
	}
	return found, found != nil
}

// principal is who a request acts as: a configured token (an admin of
// everything, or of the test environment) or a tenant access token.
type principal struct {
	// name is what the request's actions are recorded as (a replay's By):
	// "admin" for a configured token, "token tok_…" for a tenant token.
	// Never the token itself.
	name string
	env  engine.Environment // the credential's environment
	// tenant is a tenant token's one tenant; "" for a configured token.
	tenant  string
	expires time.Time // a tenant token's expiry; zero for a configured token
	// returnURL is a portal session's way back to the operator's app;
	// "" otherwise.
	returnURL string
	// tokenID is a tenant token's ID; portal says it is a portal
	// session's (engine.PurposePortalSession), which logging out revokes.
	tokenID string
	portal  bool
	cred    *credential // the configured token (its ingest limiter); nil for a tenant token
}

// adminName is the principal name of every configured token: they are
// not named individually.
const adminName = "admin"

// errUnauthorized is the one answer to every authentication failure.
func errUnauthorized() error {
	return engine.Errorf(engine.CodeUnauthorized, "", "missing or invalid bearer token")
}

// errTenantTokenForbidden is a tenant token's answer on any route it may
// not use: the same for another tenant that exists and one that does not,
// and for a route that is not a tenant's, so it reveals nothing.
func errTenantTokenForbidden() error {
	return engine.Errorf(engine.CodeForbidden, "", "%s", tenantTokenForbidden)
}

// tenantTokenForbidden is errTenantTokenForbidden's message, which a
// portal session's error page replaces with the customer's words.
const tenantTokenForbidden = "this token is not allowed here: a tenant access token acts on its own tenant's routes only"

// identify returns the principal token stands for: a configured token,
// else (for a token with engine.AccessTokenPrefix) an active tenant access
// token, read from the store by its hash — one read per request, so a
// revocation or an expiry holds from the next request on. Every failure
// is the same CodeUnauthorized error.
func (s *server) identify(ctx context.Context, token string) (principal, error) {
	if token == "" {
		return principal{}, errUnauthorized()
	}
	if c, ok := s.authenticate(token); ok {
		return principal{name: adminName, env: c.env, cred: c}, nil
	}
	if !strings.HasPrefix(token, engine.AccessTokenPrefix) {
		return principal{}, errUnauthorized()
	}
	t, err := s.svc.LookupAccessToken(ctx, token)
	if err != nil {
		return principal{}, err
	}
	return principal{name: t.Principal(), env: t.Environment, tenant: t.TenantID, expires: t.Expires, returnURL: t.ReturnURL,
		tokenID: t.ID, portal: t.Purpose == engine.PurposePortalSession}, nil
}

// scope says which principals a route admits besides admin tokens.
type scope int

const (
	// scopeAdmin: configured tokens only (a test token only on a test
	// tenant's routes). Tenant tokens get 403.
	scopeAdmin scope = iota
	// scopeTenant: also a tenant token, on its own tenant's routes.
	scopeTenant
	// scopeAnyToken: every valid token (the catalogue read).
	scopeAnyToken
)

// allow reports CodeForbidden unless p may use a route of scope sc for
// tenant (the route's :tenant; "" when it has none). A test token may use
// the routes of test tenants (and create them) and scopeAnyToken routes;
// a tenant token, scopeTenant routes of its own tenant and scopeAnyToken
// routes; anything else is a 403.
func (s *server) allow(ctx context.Context, p principal, sc scope, tenant string) error {
	switch {
	case p.tenant != "":
		if sc == scopeAnyToken || sc == scopeTenant && tenant == p.tenant {
			return nil
		}
		return errTenantTokenForbidden()
	case p.env == engine.EnvironmentTest:
		switch {
		case tenant != "":
			return s.svc.CheckTenantAccess(ctx, tenant)
		case sc == scopeAnyToken:
			return nil
		}
		return engine.Errorf(engine.CodeForbidden, "", "a test token acts on test tenants only; this route needs a live token")
	}
	return nil
}

type principalKey struct{}
type credentialKey struct{}

// principalOf returns the principal authorize put in ctx.
func principalOf(ctx context.Context) (principal, bool) {
	p, ok := ctx.Value(principalKey{}).(principal)
	return p, ok
}

// replayedBy is who a replay made by request r is recorded as: its
// principal's name ("admin", or "token tok_…").
func replayedBy(r *http.Request) string {
	if p, ok := principalOf(r.Context()); ok {
		return p.name
	}
	return adminName
}

// withPrincipal returns ctx carrying p, its environment for the engine
// (engine.WithCallerEnvironment) and its configured credential, if any.
func withPrincipal(ctx context.Context, p principal) context.Context {
	ctx = engine.WithCallerEnvironment(ctx, p.env)
	ctx = context.WithValue(ctx, principalKey{}, p)
	if p.cred != nil {
		ctx = context.WithValue(ctx, credentialKey{}, p.cred)
	}
	return ctx
}

// authorize runs h for a request whose bearer token identifies a
// principal that sc admits (see allow). A missing or wrong token, or an
// expired or revoked tenant token, is a 401 that says only that. The
// request's context carries the principal.
func (s *server) authorize(sc scope, h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		token, _ := bearerToken(r.Header.Get("Authorization"))
		p, err := s.identify(r.Context(), token)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(withPrincipal(r.Context(), p))
		tenant := ps.ByName("tenant")
		if err := s.allow(r.Context(), p, sc, tenant); err != nil {
			s.writeError(w, r, err)
			return
		}
		if tenant != "" && r.Method != http.MethodPut && engine.ValidateTenantID(tenant) != nil {
			// No request names a tenant by an id that cannot be one: the
			// reserved engine.OperatorTenant, which exists, stays out of
			// reach of every tenant route, whatever the route's own
			// checks. PUT creates: it answers such an id 422.
			s.writeError(w, r, engine.TenantNotFound())
			return
		}
		h(w, r, ps)
	}
}

// limitIngest wraps the ingest handler with the per-token rate limit
// (Options.IngestRate): over it, the answer is 429 rate_limited with
// Retry-After, in whole seconds, and nothing is read or stored.
func (s *server) limitIngest(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		c, _ := r.Context().Value(credentialKey{}).(*credential)
		if c != nil && c.limiter != nil {
			res := c.limiter.Reserve()
			if delay := res.Delay(); delay > 0 {
				res.Cancel()
				secs := int64(math.Ceil(delay.Seconds()))
				if !res.OK() || secs < 1 {
					secs = 1
				}
				s.writeError(w, r, &engine.Error{Code: engine.CodeRateLimited, RetryAfter: time.Duration(secs) * time.Second,
					Message: fmt.Sprintf("this token sends events faster than its limit of %g per second ([api] ingest_rate); retry after %d s", s.opts.IngestRate, secs)})
				return
			}
		}
		h(w, r, ps)
	}
}

// secretResponse is the answer of a rotation or revocation: the endpoint
// and its new secret, which no read shows again (only a reveal does).
type secretResponse struct {
	engine.Endpoint
	Secret      string             `json:"secret"`
	Environment engine.Environment `json:"environment"`
	// PreviousSecretExpires is when the previous secret stops signing;
	// absent when it stopped at once.
	PreviousSecretExpires time.Time `json:"previous_secret_expires,omitzero"`
}

func (s *server) writeSecret(w http.ResponseWriter, r *http.Request, res engine.SecretResult) {
	w.Header().Set("Cache-Control", "no-store") // the body carries the secret
	s.writeJSON(w, r, http.StatusOK, secretResponse{
		Endpoint: res.Endpoint, Secret: res.Secret, Environment: res.Environment,
		PreviousSecretExpires: res.PreviousExpires,
	})
}

func (s *server) handleRotateSecret(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in engine.RotateInput
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.RotateSecret(r.Context(), ps.ByName("tenant"), ps.ByName("id"), in)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeSecret(w, r, res)
}

func (s *server) handleRevokeSecret(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in struct{}
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.RevokeSecret(r.Context(), ps.ByName("tenant"), ps.ByName("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeSecret(w, r, res)
}

// revealResponse is the answer of POST …/secret/reveal: the keys the
// endpoint signs with now, and its custom headers in plain.
type revealResponse struct {
	Secret string `json:"secret"`
	// Previous are the old keys still in their rotation grace window,
	// newest first; [] when there are none.
	Previous []previousSecret `json:"previous"`
	// Headers are the endpoint's custom headers, name to value, in
	// plain: the only answer that shows their values. {} when none.
	Headers     map[string]string  `json:"headers"`
	Environment engine.Environment `json:"environment"`
}

// previousSecret is an old key that signs until Expires.
type previousSecret struct {
	Secret  string    `json:"secret"`
	Expires time.Time `json:"expires"`
}

// revealSecret reveals the secrets of endpoint id of tenant to by (the
// principal's name), as the API and the console do: the engine records
// the reveal on the endpoint, and the operator's log gets one info line
// that names the tenant, the endpoint and by, never a key.
func (s *server) revealSecret(ctx context.Context, tenant, id, by string) (engine.RevealedSecret, error) {
	res, err := s.svc.RevealSecret(ctx, tenant, id, by)
	if err != nil {
		return res, err
	}
	s.log.InfoContext(ctx, "endpoint secret revealed",
		slog.String("tenant", tenant), slog.String("endpoint", id), slog.String("by", by))
	return res, nil
}

// handleRevealSecret: POST /v1/tenants/:tenant/endpoints/:id/secret/reveal
// (body optional, {}). A POST, not a GET: it is an act that is recorded,
// and no cache or prefetch may make it or keep its answer.
func (s *server) handleRevealSecret(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in struct{}
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.revealSecret(r.Context(), ps.ByName("tenant"), ps.ByName("id"), replayedBy(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := revealResponse{Secret: res.Secret, Previous: make([]previousSecret, len(res.Previous)), Headers: res.Headers.Map(), Environment: res.Environment}
	for i, p := range res.Previous {
		out.Previous[i] = previousSecret{Secret: p.Key, Expires: p.Expires}
	}
	w.Header().Set("Cache-Control", "no-store") // the body carries the secrets and header values
	s.writeJSON(w, r, http.StatusOK, out)
}

// verificationResponse is the answer of POST .../endpoints/:id/verify.
type verificationResponse struct {
	Verified bool            `json:"verified"`
	Reason   string          `json:"reason,omitempty"`
	Endpoint engine.Endpoint `json:"endpoint"`
}

func (s *server) handleVerifyEndpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	var in struct{}
	if err := decodeJSON(w, r, s.maxBody, &in, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	ep, res, err := s.svc.VerifyEndpoint(r.Context(), ps.ByName("tenant"), ps.ByName("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Location", "/v1/tenants/"+url.PathEscape(ep.TenantID)+"/endpoints/"+url.PathEscape(ep.ID))
	s.writeJSON(w, r, http.StatusOK, verificationResponse{Verified: res.Verified, Reason: res.Reason, Endpoint: ep})
}
