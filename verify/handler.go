package verify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
)

// DefaultMaxBodyBytes is the largest body a Receiver reads when
// MaxBodyBytes is zero: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// HandleFunc is the receiver's code for one verified, first-seen event.
// It runs inside the inbox transaction (see Inbox.Receive): local writes
// through tx, external work as tasks. m.ID is set under both schemes.
// A non-nil error rolls everything back and answers 500, so the sender
// delivers the event again later.
type HandleFunc func(ctx context.Context, tx Tx, m Message) error

// Receiver is an http.Handler for webhook deliveries. For each POST it
// reads the raw body (at most MaxBodyBytes), verifies it, checks that the
// body is a JSON envelope whose "id" is the signed event id, and hands it
// to Inbox.Receive with Handle. The answers, by the sender's contract
// (2xx is done, 5xx is retried, other 4xx are permanent):
//
//	200  processed, or already processed (a duplicate; Handle not run)
//	400  body is not a JSON object with a string "id", the id differs
//	     from webhook-id, or the id was processed with another body
//	401  "invalid signature", whatever the verification error was; the
//	     typed error goes to Logger only
//	405  not a POST
//	413  body over MaxBodyBytes
//	425  Ordered, and the previous event of its ordering key is not
//	     processed yet (ErrOutOfOrder, from the check or from Handle)
//	500  Handle or the inbox failed, or the Receiver has no valid secret
//
// Set the fields before serving; Handler fills the usual ones.
type Receiver struct {
	Verifier Verifier
	Inbox    Inbox      // must not be nil
	Handle   HandleFunc // nil: record the event, nothing else
	// Sender names the sender in inbox keys; "" is fine for a receiver of
	// one sender. Mount one Receiver per sender, each with its secrets.
	Sender       string
	MaxBodyBytes int64        // 0: DefaultMaxBodyBytes
	Logger       *slog.Logger // nil: slog.Default()
	// Ordered refuses, with 425, an event with an ordering key whose
	// previous event in that key (webhook-previous-sequence) the inbox
	// has not processed (see order.go), so that Handle sees each key's
	// events in sequence order. The Inbox must be an OrderInbox.
	Ordered bool
}

// Handler returns a Receiver that verifies with secrets (all the active
// ones: two during a rotation), records in inbox and runs fn.
func Handler(secrets []string, inbox Inbox, fn HandleFunc) *Receiver {
	return &Receiver{Verifier: Verifier{Secrets: secrets}, Inbox: inbox, Handle: fn}
}

// ServeHTTP implements http.Handler.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if challenge := r.Header.Get(HeaderChallenge); challenge != "" {
		rc.answerChallenge(w, challenge)
		return
	}
	limit := rc.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}

	m, err := rc.Verifier.Verify(r.Header, body)
	if err != nil {
		if errors.Is(err, ErrNoSecrets) || errors.Is(err, ErrBadSecret) {
			rc.logger().Error("webhook receiver misconfigured", "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		rc.logger().Warn("webhook rejected", "err", err, "remote", r.RemoteAddr)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}

	var env struct {
		ID          string `json:"id"`
		Sequence    uint64 `json:"sequence"`
		OrderingKey string `json:"ordering_key"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.ID == "" {
		http.Error(w, `body is not a JSON event envelope with an "id"`, http.StatusBadRequest)
		return
	}
	m.Sequence, m.OrderingKey = env.Sequence, env.OrderingKey
	if v := r.Header.Get(HeaderPreviousSequence); v != "" {
		if m.PreviousSequence, err = strconv.ParseUint(v, 10, 64); err != nil {
			http.Error(w, HeaderPreviousSequence+" is not a number", http.StatusBadRequest)
			return
		}
	}
	switch m.Scheme {
	case SchemeStandard:
		if env.ID != m.ID {
			http.Error(w, "envelope id differs from webhook-id", http.StatusBadRequest)
			return
		}
	default: // the signature covers the body, hence its id, but no header
		if ids := headerValues(r.Header, HeaderID); len(ids) > 0 && (len(ids) > 1 || ids[0] != env.ID) {
			http.Error(w, "envelope id differs from webhook-id", http.StatusBadRequest)
			return
		}
		m.ID = env.ID
	}

	ctx := r.Context()
	if rc.Ordered && m.OrderingKey != "" && m.Sequence != 0 {
		oi, ok := rc.Inbox.(OrderInbox)
		if !ok {
			rc.logger().Error("webhook receiver misconfigured", "err", errNoOrderInbox)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		if err := oi.StartOrder(ctx, rc.Sender, m.Sequence); err != nil {
			rc.logger().Error("webhook not processed", "id", m.ID, "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	}
	res, err := rc.Inbox.Receive(ctx, rc.Sender, m.ID, body, func(tx Tx) error {
		if err := rc.checkOrder(tx, m); err != nil {
			return err
		}
		if rc.Handle == nil {
			return nil
		}
		return rc.Handle(ctx, tx, m)
	})
	switch {
	case errors.Is(err, ErrOutOfOrder):
		http.Error(w, err.Error(), http.StatusTooEarly)
		return
	case errors.Is(err, ErrEventConflict):
		rc.logger().Warn("webhook refused", "id", m.ID, "err", err)
		http.Error(w, "event id already processed with a different body", http.StatusBadRequest)
		return
	case errors.Is(err, ErrInvalidKey):
		http.Error(w, "event id too long", http.StatusBadRequest)
		return
	case err != nil:
		rc.logger().Error("webhook not processed", "id", m.ID, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, res.String()+"\n")
}

// errNoOrderInbox, errNoOrderTx: Ordered is set on a Receiver whose
// Inbox cannot keep order.
var (
	errNoOrderInbox = errors.New("verify: Receiver.Ordered needs an OrderInbox")
	errNoOrderTx    = errors.New("verify: Receiver.Ordered needs an Inbox whose Tx is an OrderTx")
)

// checkOrder is Ordered's check of m, in the inbox transaction tx.
func (rc *Receiver) checkOrder(tx Tx, m Message) error {
	if !rc.Ordered || m.OrderingKey == "" || m.Sequence == 0 {
		return nil
	}
	otx, ok := tx.(OrderTx)
	if !ok {
		return errNoOrderTx
	}
	ok, err := otx.InOrder(m.OrderingKey, m.Sequence, m.PreviousSequence)
	if err != nil || ok {
		return err
	}
	return outOfOrder(m.OrderingKey, m.Sequence, m.PreviousSequence)
}

func (rc *Receiver) logger() *slog.Logger {
	if rc.Logger != nil {
		return rc.Logger
	}
	return slog.Default()
}

// Standard Webhooks endpoint-verification headers: the sender's challenge
// and the receiver's answer.
const (
	HeaderChallenge         = "webhook-challenge"
	HeaderChallengeResponse = "webhook-challenge-response"
)

// answerChallenge answers an endpoint-verification challenge (a request
// with a webhook-challenge header and no event) with the first secret that
// is usable, so a sender that requires verification starts delivering.
func (rc *Receiver) answerChallenge(w http.ResponseWriter, challenge string) {
	for _, s := range rc.Verifier.Secrets {
		if resp, err := ChallengeResponse(s, challenge); err == nil {
			w.Header().Set(HeaderChallengeResponse, resp)
			w.WriteHeader(http.StatusOK)
			return
		}
	}
	rc.logger().Error("webhook receiver misconfigured: no usable secret to answer a challenge")
	http.Error(w, "internal error", http.StatusInternalServerError)
}
