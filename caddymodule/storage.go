package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/storage"
	"github.com/palmgate/palmgate/storage/badgerstore"
	"github.com/palmgate/palmgate/storage/memstore"
	"github.com/palmgate/palmgate/storage/pgstore"
)

// StorageConfig selects the storage backend.
type StorageConfig struct {
	// Backend is the storage engine: "badger" (embedded, one instance; the
	// default) or "postgres" (several instances on one database).
	Backend string `json:"backend,omitempty"`
	// Path is the Badger directory. Default: palmgate/ under Caddy's data
	// directory.
	Path string `json:"path,omitempty"`
	// DSN is the PostgreSQL connection string (a postgres:// URL or key=value
	// pairs); placeholders such as {env.PALMGATE_DSN} work.
	DSN string `json:"dsn,omitempty"`
	// MaxConns is the most connections this instance opens to PostgreSQL.
	// Default: 10.
	MaxConns int `json:"max_conns,omitempty"`
	// StatementTimeout bounds one SQL statement; past it the request answers 503.
	// Default: 5s.
	StatementTimeout caddy.Duration `json:"statement_timeout,omitempty"`
	// ConnectTimeout bounds making a connection, the one at start included: an
	// unreachable database fails the config load after it rather than hanging.
	// Default: the DSN's connect_timeout, or 5s when it has none.
	ConnectTimeout caddy.Duration `json:"connect_timeout,omitempty"`
	// DisableGroupCommits runs every PostgreSQL transaction on its own: under
	// load, concurrent requests of one instance no longer share a transaction
	// and its commit (grouped commits, on by default). Simpler, and slower
	// under load. Caddyfile: `group_commits off`.
	DisableGroupCommits bool `json:"disable_group_commits,omitempty"`
}

func (c *StorageConfig) setDefaults() {
	if c.Backend == "" {
		c.Backend = "badger"
	}
	if c.Backend == "badger" && c.Path == "" {
		c.Path = filepath.Join(caddy.AppDataDir(), "palmgate")
	}
}

func (c *StorageConfig) validate() error {
	switch c.Backend {
	case "badger":
		if c.DSN != "" {
			return errors.New("storage: a dsn is for the postgres backend")
		}
		if c.DisableGroupCommits {
			return errors.New("storage: disable_group_commits is for the postgres backend")
		}
	case "postgres":
		if c.DSN == "" {
			return errors.New("storage: postgres needs a dsn: `storage postgres <dsn>`")
		}
		if c.MaxConns < 0 || c.StatementTimeout < 0 || c.ConnectTimeout < 0 {
			return errors.New("storage: max_conns, statement_timeout and connect_timeout must not be negative")
		}
	default:
		return fmt.Errorf("storage: unknown backend %q (supported: badger, postgres)", c.Backend)
	}
	return nil
}

// stores shares open stores across config generations: an open Badger directory is
// locked, and a PostgreSQL pool is worth keeping, so a reload reuses the store
// rather than opening it again.
var stores = caddy.NewUsagePool()

// sharedStore is what the usage pool holds. The app keeps the store itself, not
// this wrapper: the embedded interface would hide the store's optional
// capabilities (storage.KeyReader), and core would silently take the slower path.
type sharedStore struct{ storage.Store }

func (s sharedStore) Destruct() error { return s.Close() }

// validating reports whether this process is `caddy validate` (or `caddy adapt
// --validate`), which provisions the config without running it: Caddy tells its
// modules nothing of the kind.
func validating() bool {
	if len(os.Args) < 2 {
		return false
	}
	return os.Args[1] == "validate" || (os.Args[1] == "adapt" && slices.ContainsFunc(os.Args[2:], func(a string) bool {
		return a == "--validate" || a == "--validate=true"
	}))
}

// openStore opens the configured store, or shares the one a previous config
// generation opened.
func (a *App) openStore() error {
	var key string
	var open func() (storage.Store, error)
	switch a.Storage.Backend {
	case "postgres":
		dsn := caddy.NewReplacer().ReplaceKnown(a.Storage.DSN, "")
		cfg := pgstore.Config{
			DSN: dsn, MaxConns: int32(a.Storage.MaxConns), Logger: a.logger.Named("postgres"),
			StatementTimeout: time.Duration(a.Storage.StatementTimeout),
			ConnectTimeout:   time.Duration(a.Storage.ConnectTimeout),
			NoGroupCommits:   a.Storage.DisableGroupCommits,
			Observer:         newStoreObserver("postgres", storage.OpView, storage.OpUpdate, storage.OpReadKey),
		}
		key = fmt.Sprintf("postgres:%d:%d:%d:%t:%s", cfg.MaxConns, cfg.StatementTimeout, cfg.ConnectTimeout, cfg.NoGroupCommits, dsn)
		open = func() (storage.Store, error) {
			s, err := pgstore.Open(context.Background(), cfg)
			if err != nil {
				return nil, fmt.Errorf("storage: opening postgres: %w", err)
			}
			return s, nil
		}
	default:
		path, err := filepath.Abs(a.Storage.Path)
		if err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		key = "badger:" + path
		open = func() (storage.Store, error) {
			s, err := badgerstore.OpenWith(path, badgerstore.Options{
				Logger: a.logger.Named("badger"), Observer: newStoreObserver("badger", storage.OpView, storage.OpUpdate),
			})
			if err != nil {
				if errors.Is(err, badgerstore.ErrLocked) && validating() {
					// `caddy validate` beside the running Caddy, which holds the
					// directory: check the rest of the config on a throwaway store.
					a.logger.Info("storage badger: the directory is in use (by the running Caddy?); validating the config without opening it",
						zap.String("path", path))
					return memstore.New(), nil
				}
				if errors.Is(err, badgerstore.ErrLocked) {
					return nil, fmt.Errorf("storage badger: %s is in use by another process, most likely another Caddy with this `storage badger`: "+
						"stop it, or give this one a directory of its own (instances share one store only on `storage postgres`)", path)
				}
				return nil, fmt.Errorf("storage badger: %w", err) // err names the directory
			}
			return s, nil
		}
	}
	v, _, err := stores.LoadOrNew(key, func() (caddy.Destructor, error) {
		s, err := open()
		if err != nil {
			return nil, err
		}
		return sharedStore{s}, nil
	})
	if err != nil {
		return err
	}
	a.storeKey, a.store = key, v.(sharedStore).Store
	return nil
}
