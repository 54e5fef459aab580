package bridge_test

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/directbridge/directbridge/bridge"
	"github.com/directbridge/directbridge/sandbox"
)

// TestRateLimitSetting: DIRECTBRIDGE_API_RATE_LIMIT as read from the
// environment. Unset, the embedded sandbox is unlimited and a real
// provider gets the courtesy default; a value set always wins, and 0 or
// "unlimited" lifts the budget for a real provider too.
func TestRateLimitSetting(t *testing.T) {
	const realURL = "https://hisp.example.org"
	for _, tc := range []struct {
		apiURL, value string // value "-": unset
		want          float64
	}{
		{"", "-", 0},
		{realURL, "-", bridge.DefaultProviderRate},
		{"", "", 0},
		{realURL, "", bridge.DefaultProviderRate},
		{"", "100", 100},
		{realURL, "250", 250},
		{realURL, " 0.5 ", 0.5},
		{realURL, "unlimited", 0},
		{realURL, "Unlimited", 0},
		{realURL, "0", 0},
		{"", "unlimited", 0},
	} {
		cfg := envConfig(t, tc.apiURL, tc.value)
		got, err := cfg.RateLimit()
		if err != nil || got != tc.want {
			t.Errorf("API_URL %q, API_RATE_LIMIT %q: %v, %v; want %v", tc.apiURL, tc.value, got, err, tc.want)
		}
		if errs := cfg.Validate(); len(errs) != 0 {
			t.Errorf("API_URL %q, API_RATE_LIMIT %q: Validate: %v", tc.apiURL, tc.value, errs)
		}
	}
	for _, bad := range []string{"-1", "fast", "100/s", "NaN", "Inf", "1e999", "0x"} {
		cfg := envConfig(t, realURL, bad)
		if _, err := cfg.RateLimit(); err == nil {
			t.Errorf("API_RATE_LIMIT %q accepted", bad)
		}
		errs := cfg.Validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "DIRECTBRIDGE_API_RATE_LIMIT") || !strings.Contains(errs[0].Error(), bad) {
			t.Errorf("API_RATE_LIMIT %q: Validate %v; want one error naming the variable and the value", bad, errs)
		}
	}
}

// envConfig reads the bridge's configuration from an environment where
// DIRECTBRIDGE_API_URL is apiURL (unset when empty) and
// DIRECTBRIDGE_API_RATE_LIMIT is value ("-": unset).
func envConfig(t *testing.T, apiURL, value string) bridge.Config {
	t.Helper()
	for k, v := range map[string]string{"DIRECTBRIDGE_API_URL": apiURL, "DIRECTBRIDGE_API_RATE_LIMIT": value} {
		t.Setenv(k, v)
		if v == "-" || k == "DIRECTBRIDGE_API_URL" && v == "" {
			os.Unsetenv(k)
		}
	}
	cfg, err := bridge.ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBudgetOfRunningBridge: the bridge spends the budget the setting
// gives, and says so in its banner: none on the embedded sandbox by
// default, 100 requests/s for a provider at DIRECTBRIDGE_API_URL, and what
// is set otherwise. An invalid value stops New.
func TestBudgetOfRunningBridge(t *testing.T) {
	provider, err := sandbox.Open(sandbox.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Close()
	ts := httptest.NewServer(provider)
	defer ts.Close()

	for _, tc := range []struct {
		apiURL, rate, want string
	}{
		{"", "", "budget:        unlimited requests to the provider"},
		{ts.URL, "", "budget:        100 requests/s to the provider"},
		{ts.URL, "unlimited", "budget:        unlimited requests to the provider"},
		{"", "20", "budget:        20 requests/s to the provider"},
	} {
		cfg := testConfig(t)
		cfg.APIURL, cfg.APIRateLimit = tc.apiURL, tc.rate
		var banner strings.Builder
		b, err := bridge.New(cfg, nil, &banner)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := b.Run(ctx); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if !strings.Contains(banner.String(), tc.want) {
			t.Errorf("API_URL %q, API_RATE_LIMIT %q: banner lacks %q:\n%s", tc.apiURL, tc.rate, tc.want, banner.String())
		}
	}
	cfg := testConfig(t)
	cfg.APIRateLimit = "-3"
	if _, err := bridge.New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "DIRECTBRIDGE_API_RATE_LIMIT") {
		t.Errorf("API_RATE_LIMIT -3: New: %v; want an error naming the variable", err)
	}
}
