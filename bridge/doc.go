// Package bridge runs directbridge: it builds the pieces from a Config
// (DefaultConfig for an embedder, ConfigFromEnv for the daemon), starts
// the IMAP and SMTP submission listeners, the admin socket, the metrics
// and health listener and, when no provider URL is set, the embedded
// sandbox provider; Run serves until its context ends and then drains.
//
// It owns the lifecycle and nothing else: what a command does belongs to
// the fronts (imapbackend, smtpbackend) and the engine they share
// (internal/mailstore); how the provider is reached to restclient and
// upstream. It never speaks a protocol itself and keeps no mail.
//
//	cfg := bridge.DefaultConfig()
//	cfg.APIURL = "https://hisp.example/api"
//	b, err := bridge.New(cfg, logger, os.Stdout)
//	...
//	err = b.Run(ctx)
package bridge
