package httpapi

import (
	"bufio"
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

// handleBackup streams a hot, consistent copy of the database (one bbolt
// read transaction) as application/octet-stream. Ingest and delivery go on
// meanwhile. The copy is complete only if the response ends normally: a
// client must treat a cut-off transfer as failed (webhookd backup does).
func (s *server) handleBackup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.opts.Backup == nil {
		s.handleNotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="webhookd-`+time.Now().UTC().Format("20060102T150405Z")+`.db"`)
	w.Header().Set("Cache-Control", "no-store")
	bw := bufio.NewWriterSize(w, 256<<10)
	if _, err := s.opts.Backup.WriteTo(bw); err != nil {
		// Headers are gone: abort the response so the client sees a
		// broken transfer, never a short file that looks whole.
		s.log.ErrorContext(r.Context(), "backup failed", "err", err)
		panic(http.ErrAbortHandler)
	}
	if err := bw.Flush(); err != nil {
		panic(http.ErrAbortHandler)
	}
}
