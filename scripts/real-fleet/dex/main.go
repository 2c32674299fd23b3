// A Dex OIDC provider for Kairship's identity tests, built from Dex's module as a
// library. Dex's own command needs its api/v2 module at the same commit (for its gRPC
// admin API), which the Go module proxy does not serve; the tests need none of that API.
// It reads a JSON file with the settings the tests use, in the shape of Dex's config:
// issuer, web (https, tlsCert, tlsKey, allowedOrigins), oauth2 (passwordConnector,
// skipApprovalScreen, responseTypes, grantTypes), expiry.idTokens, enablePasswordDB,
// staticPasswords (with groups) and staticClients. Storage is in memory.
//
// Usage: dex serve CONFIG.json
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	gosundheit "github.com/AppsFlyer/go-sundheit"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dexidp/dex/server"
	"github.com/dexidp/dex/server/connectors"
	"github.com/dexidp/dex/server/signer"
	"github.com/dexidp/dex/storage"
	"github.com/dexidp/dex/storage/memory"
)

type settings struct {
	Issuer string `json:"issuer"`
	Web    struct {
		HTTPS          string   `json:"https"`
		TLSCert        string   `json:"tlsCert"`
		TLSKey         string   `json:"tlsKey"`
		AllowedOrigins []string `json:"allowedOrigins"`
	} `json:"web"`
	OAuth2 struct {
		PasswordConnector  string   `json:"passwordConnector"`
		SkipApprovalScreen bool     `json:"skipApprovalScreen"`
		ResponseTypes      []string `json:"responseTypes"`
		GrantTypes         []string `json:"grantTypes"`
	} `json:"oauth2"`
	Expiry struct {
		IDTokens string `json:"idTokens"`
	} `json:"expiry"`
	EnablePasswordDB bool `json:"enablePasswordDB"`
	StaticPasswords  []struct {
		Email    string   `json:"email"`
		Hash     string   `json:"hash"`
		Username string   `json:"username"`
		UserID   string   `json:"userID"`
		Groups   []string `json:"groups"`
	} `json:"staticPasswords"`
	StaticClients []storage.Client `json:"staticClients"`
}

func main() {
	if len(os.Args) != 3 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: dex serve CONFIG.json")
		os.Exit(2)
	}
	if err := serve(os.Args[2]); err != nil {
		fmt.Fprintf(os.Stderr, "dex: %v\n", err)
		os.Exit(1)
	}
}

func serve(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var c settings
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	validFor, err := time.ParseDuration(c.Expiry.IDTokens)
	if err != nil {
		return fmt.Errorf("expiry.idTokens %q: %v", c.Expiry.IDTokens, err)
	}

	var s storage.Storage = memory.New(logger)
	s = storage.WithStaticClients(s, c.StaticClients)
	passwords := make([]storage.Password, 0, len(c.StaticPasswords))
	for _, p := range c.StaticPasswords {
		passwords = append(passwords, storage.Password{
			Email: p.Email, Hash: []byte(p.Hash), Username: p.Username, UserID: p.UserID, Groups: p.Groups,
		})
	}
	s = storage.WithStaticPasswords(s, passwords, logger)
	if c.EnablePasswordDB {
		s = storage.WithStaticConnectors(s, []storage.Connector{
			{ID: connectors.LocalConnector, Name: "Email", Type: connectors.LocalConnector},
		})
	}

	local := signer.LocalConfig{KeysRotationPeriod: "6h"}
	keys, err := local.Open(context.Background(), s, validFor, time.Now, logger)
	if err != nil {
		return fmt.Errorf("signing keys: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := server.NewServer(ctx, server.Config{
		Issuer:                 c.Issuer,
		Storage:                s,
		AllowedGrantTypes:      c.OAuth2.GrantTypes,
		SupportedResponseTypes: c.OAuth2.ResponseTypes,
		SkipApprovalScreen:     c.OAuth2.SkipApprovalScreen,
		PasswordConnector:      c.OAuth2.PasswordConnector,
		AllowedOrigins:         c.Web.AllowedOrigins,
		IDTokensValidFor:       validFor,
		Logger:                 logger,
		Now:                    time.Now,
		PrometheusRegistry:     prometheus.NewRegistry(),
		HealthChecker:          gosundheit.New(),
		Signer:                 keys,
	})
	if err != nil {
		return fmt.Errorf("starting the server: %v", err)
	}
	httpServer := &http.Server{Addr: c.Web.HTTPS, Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpServer.Shutdown(shutdown)
	}()
	logger.Info("listening", "https", c.Web.HTTPS, "issuer", c.Issuer)
	if err := httpServer.ListenAndServeTLS(c.Web.TLSCert, c.Web.TLSKey); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
