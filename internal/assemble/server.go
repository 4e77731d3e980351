package assemble

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/keys"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// serve builds the HTTP front over eng: the server section's bounds, the
// observers' routes, the Responses API's conversations and, when keys are
// on, the virtual keys. What it opens, m closes.
func (m *Mesh) serve(cfg *config.Config, eng *engine.Engine, sh shared, obs observers, o Options) (*server.Server, error) {
	sc := cfg.Server
	so := server.Options{Engine: eng, Logger: o.Logger, MaxBodyBytes: sc.MaxBodyBytes,
		BodyReadTimeout: time.Duration(sc.BodyReadTimeout), MinBodyRate: sc.MinBodyRateBytesPerSec, MaxInflightBodyBytes: sc.MaxInflightBodyBytes,
		MaxMessages: sc.MaxMessages, MaxHeaderBytes: sc.MaxHeaderBytes, ListenAddr: sc.Listen, AllowedHosts: sc.AllowedHosts, AllowedOrigins: sc.AllowedOrigins,
		AdminToken: sc.AdminToken.Value(), ReadToken: sc.ReadToken.Value(), Routes: obs.routes}
	if obs.metrics != nil {
		so.OnUnknownRoute = obs.metrics.UnknownRoute
	}
	var err error
	if so.Conversations, err = m.conversations(cfg, sh, o); err != nil {
		return nil, err
	}
	if cfg.KeysOn() {
		if err := m.openKeys(cfg, eng, sh, o, &so); err != nil {
			return nil, err
		}
	}
	return server.New(so), nil
}

// openKeys opens the virtual-key store and its accounting, and plugs them
// into the server: authentication on the API routes, /admin/keys behind
// the admin token.
func (m *Mesh) openKeys(cfg *config.Config, eng *engine.Engine, sh shared, o Options, so *server.Options) error {
	var st keys.Store
	var ledger keys.Ledger
	if cfg.KeysStore() == config.KeysStoreRedis {
		// Every replica reads the same keys and enforces each key's
		// limits on the fleet's counters.
		rk := sh.store.Keys()
		st, ledger = rk, rk
	} else {
		path := cfg.Keys.Path
		if path == "" {
			path = config.DefaultKeysPath
		}
		sq, err := sqlite.OpenKeys(path)
		if err != nil {
			return fmt.Errorf("keys.path: %w", err)
		}
		m.keyStore, st = sq, sq
	}
	km, err := keys.Open(context.Background(), keys.Options{Store: st, Ledger: ledger, LedgerTimeout: time.Duration(cfg.Redis.Timeout),
		Require: cfg.Server.RequireKeys, Refresh: cfg.Keys.RefreshInterval.Std(), Price: eng.Price, Now: o.Now, Logger: o.Logger})
	if err != nil {
		return err
	}
	m.keys = km
	so.Authenticate = func(r *http.Request) (server.Caller, *llm.APIError) {
		c, ae := km.Authenticate(r)
		if c == nil {
			return nil, ae // no typed nil in the interface
		}
		return c, nil
	}
	so.AdminRoutes = append(so.AdminRoutes, server.Route{Path: keys.AdminPath, Prefix: true, Handler: km.AdminHandler()})
	return nil
}

// conversations opens the store of the Responses API's conversations in
// the backend responses.store names (ResponsesStore: Redis, the request
// log's file, or memory).
func (m *Mesh) conversations(cfg *config.Config, sh shared, o Options) (*convstate.Store, error) {
	rc := cfg.Responses
	var b convstate.Backend
	switch cfg.ResponsesStore() {
	case convstate.StoreRedis:
		if sh.store == nil {
			return nil, errors.New("responses.store: redis needs the redis section (redis.url)")
		}
		b = sh.store.Conversations(rc.Bounds())
	case convstate.StoreSQLite:
		if !cfg.RequestLog.On() {
			return nil, errors.New("responses.store: sqlite keeps the conversations in the request log's file: it needs the request log (request_log.path)")
		}
		path := cfg.RequestLog.Path
		if path == "" {
			path = sqlite.DefaultPath
		}
		db, err := sqlite.OpenConversations(path, rc.Bounds())
		if err != nil {
			return nil, fmt.Errorf("responses.store: %w", err)
		}
		// The answer is kept in memory at once and written to the file
		// behind the call (convstate.WriteBehind): no transaction on the
		// request path.
		m.convDB = db
		m.convWB = convstate.NewWriteBehind(db, rc.Bounds(), 0, o.Logger)
		b = m.convWB
	default:
		b = convstate.NewMemory(rc.Bounds())
	}
	return convstate.New(b, convstate.Options{Config: rc, Now: o.Now, Logger: o.Logger}), nil
}
