package postgres

import "context"

// Holders' records, many in one statement.
//
// Every attempt's outcome is a write, and a node records as many as it
// makes attempts. Alone, each was a statement and a commit of its own;
// a node's dispatcher records many at once (recordLater), so the
// holders' records (recordAsRead's compare and set) wait in a queue
// and whoever finds fewer than maxRecordBatches statements running
// takes all that wait into one UPDATE and commit: a record waits for
// at most the statement before it, and under load one commit carries
// many. Each applies only to its own row, and only while that row is
// still exactly as its holder read it: one that does not apply is
// refused alone, as before, and its caller takes the row lock.

// maxRecordBatches bounds the record statements one node runs at once:
// one, for the reason of maxIngestBatches.
const maxRecordBatches = 1

// maxRecordBatch bounds the records of one statement.
const maxRecordBatch = 500

// heldRecord is one holder's record: the row's new columns, written
// if the row's lease token is still token and its document still read.
type heldRecord struct {
	id, state       string
	next, due, dead *int64
	newToken, until *int64
	doc             []byte
	token           int64
	read            []byte
	applied         bool
	err             error
}

// record writes r with the records waiting beside it (the store's
// records queue) and reports whether r applied.
func (s *Store) record(r *heldRecord) (bool, error) {
	s.records.do(r, func(batch []*heldRecord) {
		applied, err := s.writeRecords(batch)
		s.noteWrite(err)
		for _, r := range batch {
			// A deadlock or a serialization failure: none applied, and
			// each caller takes the row lock.
			r.applied = err == nil && applied[r.id]
			if err != nil && !retryable(err) {
				r.err = err
			}
		}
	})
	return r.applied, r.err
}

// writeRecords writes batch in one statement and returns the IDs of
// the records that applied.
func (s *Store) writeRecords(batch []*heldRecord) (map[string]bool, error) {
	n := len(batch)
	ids, states := make([]string, n), make([]string, n)
	next, due, dead, newTokens, until := make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n)
	docs, reads := make([][]byte, n), make([][]byte, n)
	tokens := make([]int64, n)
	for i, r := range batch {
		ids[i], states[i] = r.id, r.state
		next[i], due[i], dead[i], newTokens[i], until[i] = r.next, r.due, r.dead, r.newToken, r.until
		docs[i], reads[i], tokens[i] = r.doc, r.read, r.token
	}
	applied := map[string]bool{}
	// Not cut by any caller's context: the records of others ride on it.
	rows, err := s.pool.Query(context.Background(), `UPDATE deliveries d SET state = u.state, next_attempt_at = u.next, due_at = u.due, dead_at = u.dead,
			lease_token = u.new_token, lease_until = u.until, doc = u.doc
		FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bytea[], $9::bigint[], $10::bytea[])
			AS u(id, state, next, due, dead, new_token, until, doc, token, read)
		WHERE d.id = u.id AND d.lease_token = u.token AND d.doc = u.read
		RETURNING d.id`, ids, states, next, due, dead, newTokens, until, docs, tokens, reads)
	if err == nil {
		for rows.Next() {
			var id string
			if err = rows.Scan(&id); err != nil {
				break
			}
			applied[id] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	return applied, err
}
