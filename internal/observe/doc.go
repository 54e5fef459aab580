// Package observe is what the bridge tells about itself, and what it must
// never tell: Prometheus metrics (metrics.go), liveness and readiness
// (health.go), and the log lines of the protocol libraries stripped of
// client input (logsafe.go). No label, probe answer or log line it makes
// carries a user address, folder name, subject or message text; what
// reaches it from a client is counted or hashed, never written.
package observe
