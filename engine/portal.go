package engine

import (
	"context"
	"net/url"
	"time"
)

// Portal links: an operator embeds the console in its own app for its
// customers. Its backend asks for a link for one tenant (IssuePortalLink,
// admin only) and opens it in the customer's browser, typically in an
// iframe; the link opens a console session as that tenant, once. A link
// is a tenant access token of purpose PurposePortalLink, kept like any
// other (only its SHA-256), short-lived, refused as a bearer token; the
// session it opens is a new tenant access token of purpose
// PurposePortalSession that lives the console's session TTL, kept in the
// browser's HttpOnly cookie and never shown. Both are listed, and
// revocable, with the tenant's tokens, so every store keeps them with no
// change and a cluster's nodes all honour them.

// Purposes of access tokens (AccessToken.Purpose).
const (
	PurposePortalLink    = "portal_link"
	PurposePortalSession = "portal_session"
)

// Portal link lifetimes.
const (
	// DefaultPortalLinkTTL is a link's lifetime when none is asked for.
	DefaultPortalLinkTTL = 10 * time.Minute
	// MaxPortalLinkTTL bounds it: a link is opened right after it is
	// made.
	MaxPortalLinkTTL = time.Hour
	// DefaultPortalSessionTTL is the lifetime of the session a link
	// opens when the caller gives none ([console] session_ttl).
	DefaultPortalSessionTTL = time.Hour
	// MaxReturnURL bounds a link's return_url, in characters.
	MaxReturnURL = 2048
)

// PortalLinkInput is the body of POST /v1/tenants/{tenant}/portal-links.
type PortalLinkInput struct {
	// TTL is how long the link may be opened, "10m" by default, at most
	// MaxPortalLinkTTL; TTLSeconds is the same in seconds.
	TTL        string `json:"ttl"`
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
	// ReturnURL, optional, is where the console's "back" link takes the
	// customer: an absolute http or https URL of the operator's app.
	ReturnURL string `json:"return_url"`
}

// IssuePortalLink makes a portal link for tenant and returns its record
// and its secret, which nothing shows again: the caller makes the URL.
func (s *Service) IssuePortalLink(ctx context.Context, tenant string, in PortalLinkInput) (AccessToken, string, error) {
	ttl := DefaultPortalLinkTTL
	d, field, given, err := durationInput("ttl", in.TTL, in.TTLSeconds, `"10m"`)
	if err != nil {
		return AccessToken{}, "", err
	}
	if given {
		ttl = d
	}
	if ttl <= 0 || ttl > MaxPortalLinkTTL {
		return AccessToken{}, "", Errorf(CodeInvalidField, field, "ttl must be more than 0s and at most 1h (3600 seconds): a link is opened right after it is made")
	}
	if err := validReturnURL(in.ReturnURL); err != nil {
		return AccessToken{}, "", err
	}
	t, err := s.Tenant(ctx, tenant)
	if err != nil {
		return AccessToken{}, "", err
	}
	return s.storeToken(ctx, AccessToken{TenantID: t.ID, Environment: t.Environment, Purpose: PurposePortalLink, ReturnURL: in.ReturnURL}, ttl)
}

// validReturnURL accepts "" or an absolute http(s) URL with a host, no
// user info, at most MaxReturnURL characters, that ValidateText takes as
// identifier-like text.
func validReturnURL(raw string) error {
	if raw == "" {
		return nil
	}
	if err := ValidateText("return_url", raw, MaxReturnURL, IdentifierText); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return Errorf(CodeInvalidField, "return_url", "return_url must be an absolute http or https URL of your app, like https://app.example.com/settings/webhooks, without user info, at most %d characters", MaxReturnURL)
	}
	return nil
}

// RedeemPortalLink opens the session of portal link link: it revokes the
// link (so it opens one session only, whoever comes second loses) and
// issues the session token, which lives sessionTTL (zero:
// DefaultPortalSessionTTL) but not past the tenant's deletion. It
// returns the link's record (its tenant and return URL), the session's
// record and the session token. Any link that cannot open — unknown,
// used, expired, not a link — is the same CodeUnauthorized.
func (s *Service) RedeemPortalLink(ctx context.Context, link string, sessionTTL time.Duration) (AccessToken, AccessToken, string, error) {
	refused := Errorf(CodeUnauthorized, "", "this portal link is not valid: it was used already, expired, or mistyped; ask the app for a new one")
	if len(link) > 128 {
		return AccessToken{}, AccessToken{}, "", refused
	}
	l, ok, err := s.store.AccessTokenByHash(ctx, HashAccessToken(link))
	if err != nil {
		return AccessToken{}, AccessToken{}, "", err
	}
	now := s.now()
	if !ok || l.Purpose != PurposePortalLink || !l.Active(now) {
		return AccessToken{}, AccessToken{}, "", refused
	}
	got, revoked, err := s.store.RevokeAccessToken(ctx, l.TenantID, l.ID, now)
	if err != nil {
		return AccessToken{}, AccessToken{}, "", err
	}
	if !revoked { // another redemption came first
		return AccessToken{}, AccessToken{}, "", refused
	}
	if sessionTTL <= 0 {
		sessionTTL = DefaultPortalSessionTTL
	}
	t, err := s.Tenant(ctx, l.TenantID)
	if err != nil {
		return AccessToken{}, AccessToken{}, "", err
	}
	sess, value, err := s.storeToken(ctx, AccessToken{TenantID: t.ID, Environment: t.Environment, Purpose: PurposePortalSession, ReturnURL: got.ReturnURL}, sessionTTL)
	if err != nil {
		return AccessToken{}, AccessToken{}, "", err
	}
	return got, sess, value, nil
}

// PortalWayBack reports whether token is a portal link or a portal
// session's token, open or not (used, expired, revoked, logged out), and
// the return URL its link was made with ("" for none). A customer who
// comes back to an ended portal session, or opens a used link, is shown
// the way back to the operator's app instead of the operator's login
// (which asks for a token a customer never has). It never says more than
// that: the answer for an unknown, pruned or other token is false.
func (s *Service) PortalWayBack(ctx context.Context, token string) (returnURL string, portal bool, err error) {
	if token == "" || len(token) > 128 {
		return "", false, nil
	}
	t, ok, err := s.store.AccessTokenByHash(ctx, HashAccessToken(token))
	if err != nil || !ok || (t.Purpose != PurposePortalLink && t.Purpose != PurposePortalSession) {
		return "", false, err
	}
	return t.ReturnURL, true, nil
}
