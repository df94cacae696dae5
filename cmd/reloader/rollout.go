package main

// The values of --rollout.
const (
	rolloutAllAtOnce = "all-at-once"
	rolloutOneFirst  = "one-first"
)
