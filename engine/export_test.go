package engine

// RecordingPerWorker exposes recordingPerWorker to the engine_test package.
const RecordingPerWorker = recordingPerWorker
