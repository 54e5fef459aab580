package bridge

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/directbridge/directbridge/internal/admin"
	"github.com/directbridge/directbridge/restclient"
	"github.com/directbridge/directbridge/upstream/directapi"
)

// AdminSocketName is the admin socket's file name in the data directory.
const AdminSocketName = "admin.sock"

// AdminSocketPath returns the admin socket's path: DIRECTBRIDGE_ADMIN_SOCKET,
// else admin.sock in the data directory; "" when it is off. The command
// line client resolves it the same way.
func (c *Config) AdminSocketPath() string {
	switch c.AdminSocket {
	case Off:
		return ""
	case "":
		dir := c.DataDir
		if dir == "" {
			dir = DefaultDataDir()
		}
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs // a relative DIRECTBRIDGE_DATA_DIR is relative to the working directory
		}
		return filepath.Join(dir, AdminSocketName)
	}
	return c.AdminSocket
}

func (c *Config) validateAdmin() []error {
	var errs []error
	if c.AdminSocket != "" && c.AdminSocket != Off {
		if err := admin.CheckPath(c.AdminSocket); err != nil {
			errs = append(errs, fmt.Errorf("DIRECTBRIDGE_ADMIN_SOCKET: %w", err))
		}
	}
	if (c.ResellerUser == "") != (c.ResellerPassword == "") {
		errs = append(errs, fmt.Errorf("DIRECTBRIDGE_RESELLER_USER and DIRECTBRIDGE_RESELLER_PASSWORD must be set together"))
	}
	return errs
}

// openAdmin binds the admin socket (unless it is off). Registration uses
// the configured reseller account; with the embedded sandbox and none
// configured, the sandbox's own (the demo account unless
// DIRECTBRIDGE_SANDBOX_RESELLER says otherwise); else registration is off.
func (b *Bridge) openAdmin() error {
	path := b.cfg.AdminSocketPath()
	if path == "" {
		return nil
	}
	if err := admin.CheckPath(path); err != nil {
		return fmt.Errorf("%w; set DIRECTBRIDGE_ADMIN_SOCKET to a shorter path, or to off", err)
	}
	var reg *restclient.Registrar
	if b.cfg.ResellerUser != "" {
		reg = b.client.NewRegistrar(b.cfg.ResellerUser, b.cfg.ResellerPassword)
	} else if b.sandbox != nil {
		if opts, _, err := b.cfg.SandboxConfig.Options(); err == nil && len(opts.Resellers) > 0 {
			reg = b.client.NewRegistrar(opts.Resellers[0].Name, directapi.Secret(opts.Resellers[0].Password))
		}
	}
	srv, err := admin.Listen(admin.Config{
		Path:      path,
		Client:    b.client,
		Registrar: reg,
		Store:     b.store,
		// The admin socket uses the client directly, not the budgeted
		// provider of the fronts; the budget reaches its requests
		// through their context.
		Budget: b.budget,
		Probe:  b.prober.Probe, // the one prober, which readiness shares
		Logger: b.log.With("component", "admin"),
	})
	if err != nil {
		return err
	}
	b.admin = srv
	return nil
}

// serveAdmin serves the admin socket until shutdownAdmin.
func (b *Bridge) serveAdmin(wg *sync.WaitGroup) {
	if b.admin == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := b.admin.Serve(); err != nil {
			b.log.Error("admin socket", "err", err)
		}
	}()
}

// shutdownAdmin stops the admin socket first, so that nothing is
// provisioned while the rest stops, and removes its file.
func (b *Bridge) shutdownAdmin(ctx context.Context) {
	if b.admin == nil {
		return
	}
	if err := b.admin.Shutdown(ctx); err != nil {
		b.log.Warn("admin shutdown", "err", err)
	}
}

// closeAdmin closes the admin socket at once (New failed, or after Run).
func (b *Bridge) closeAdmin() {
	if b.admin != nil {
		b.admin.Close()
	}
}

// bannerAdmin prints the admin socket's line of the banner.
func (b *Bridge) bannerAdmin(w io.Writer) {
	if b.admin != nil {
		fmt.Fprintf(w, "  %-28s %s\n", "admin socket:", b.admin.Path())
	}
}
