package engine

// RecordingPerWorker exposes recordingPerWorker to the engine_test package.
const RecordingPerWorker = recordingPerWorker

// ArmedTimers counts the timers d has armed (afterLocked) that have not
// fired, nor been stopped by Stop.
func ArmedTimers(d *Dispatcher) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.timers)
}

// MaxRecordReads exposes maxRecordReads to the engine_test package.
const MaxRecordReads = maxRecordReads
