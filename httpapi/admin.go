package httpapi

import (
	"bufio"
	"io"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/webhookd/webhookd/engine"
)

// handleReady answers /readyz: 200 when Options.Ready reports nil (the
// database is open, the dispatcher runs, ingest is not pushed back), else
// 503 with the reason.
func (s *server) handleReady(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			s.writeProblem(w, r, engine.CodeUnavailable, "not ready: "+err.Error(), "")
			return
		}
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}

// handleMetrics serves Options.Metrics, or 404 when there is none.
func (s *server) handleMetrics(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.opts.Metrics == nil {
		s.handleNotFound(w, r)
		return
	}
	s.opts.Metrics.ServeHTTP(w, r)
}

// handleBackup streams a hot, consistent copy of the database as
// application/octet-stream. Ingest and delivery go on meanwhile: the copy
// is taken into a local file first (see storage.DB.WriteTo), so a slow
// client holds no transaction. The copy is complete only if the response
// ends normally: a client must treat a cut-off transfer as failed (webhookd
// backup does).
//
// The server's WriteTimeout would cut a large backup; instead the answer
// is written in pieces of backupPiece bytes, and each piece gets
// WriteTimeout of its own: a client that keeps reading gets the whole
// file, one that stalls is cut, which ends the handler and frees its copy.
func (s *server) handleBackup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.opts.Backup == nil {
		s.handleNotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="webhookd-`+time.Now().UTC().Format("20060102T150405Z")+`.db"`)
	w.Header().Set("Cache-Control", "no-store")
	var out io.Writer = w
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 {
		out = &pieceDeadline{w: w, rc: http.NewResponseController(w), timeout: srv.WriteTimeout}
	}
	bw := bufio.NewWriterSize(out, backupPiece)
	if n, err := s.opts.Backup.WriteTo(bw); err != nil {
		if n == 0 {
			// Failed before a byte was sent (no room for the copy, say):
			// a proper answer is still possible.
			w.Header().Del("Content-Disposition")
			w.Header().Del("Cache-Control")
			s.writeError(w, r, err)
			return
		}
		// Headers are gone: abort the response so the client sees a
		// broken transfer, never a short file that looks whole.
		s.log.ErrorContext(r.Context(), "backup failed", "err", err)
		panic(http.ErrAbortHandler)
	}
	if err := bw.Flush(); err != nil {
		panic(http.ErrAbortHandler)
	}
}

// backupPiece is the size of the pieces a backup is written in, each with
// a write deadline of its own.
const backupPiece = 256 << 10

// pieceDeadline is a writer that moves the connection's write deadline to
// timeout from now before every write.
type pieceDeadline struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

func (p *pieceDeadline) Write(b []byte) (int, error) {
	if err := p.rc.SetWriteDeadline(time.Now().Add(p.timeout)); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}
