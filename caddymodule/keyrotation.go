package caddymodule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/palmgate/palmgate/core/event"
	"github.com/palmgate/palmgate/core/keys"
	"github.com/palmgate/palmgate/core/oidc"
)

// Scheduled rotation and retirement of the signing keys (key_rotation): the glue
// between the app and core/keys.

// minKeyRotation is the shortest key_rotation accepted.
const minKeyRotation = time.Second

// manyRetiredKeys is the number of published keys per algorithm past which
// Provision warns that key_rotation is short for the token lifetimes.
const manyRetiredKeys = 10

// parseKeyRotation reads `key_rotation <duration>` or `key_rotation off`.
func parseKeyRotation(d *caddyfile.Dispenser, target *caddy.Duration) error {
	var arg string
	if err := singleArg(d, &arg); err != nil {
		return err
	}
	if arg == "off" {
		*target = 0
		return nil
	}
	dur, err := caddy.ParseDuration(arg)
	if err != nil {
		return d.Errf("key_rotation: %q is not a duration or off: %v", arg, err)
	}
	*target = caddy.Duration(dur)
	return nil
}

// tokenLifetimes is how long each algorithm's retired keys must still verify
// what they signed (core/oidc decides: it knows what each signs).
func (a *App) tokenLifetimes() map[string]time.Duration {
	return oidc.KeyLifetimes(time.Duration(a.AccessTokenTTL), time.Duration(a.RefreshTokenTTL))
}

// validateKeyRotation checks key_rotation: off (0) or at least minKeyRotation.
func (a *App) validateKeyRotation() error {
	if d := time.Duration(a.KeyRotation); d != 0 && d < minKeyRotation {
		return fmt.Errorf("key_rotation: must be at least %s, or off, got %s", minKeyRotation, d)
	}
	return nil
}

// warnKeyRotation warns when key_rotation keeps many keys published: a retired key
// stays in the JWKS for its tokens' lifetime, so one of each rotation of that
// period is published at once.
func (a *App) warnKeyRotation() {
	every := time.Duration(a.KeyRotation)
	if every <= 0 {
		return
	}
	life := slices.Max(slices.Collect(maps.Values(a.tokenLifetimes()))) + keys.RetireMargin
	if n := int(life/every) + 1; n > manyRetiredKeys {
		a.logger.Warn("key_rotation is short for the token lifetimes: many signing keys stay published",
			zap.Duration("key_rotation", every), zap.Duration("longest_token_lifetime", life-keys.RetireMargin),
			zap.Int("keys_published_per_algorithm", n))
	}
}

// keyMaintenance runs until ctx is done: it rotates the signing keys every
// key_rotation (when set; one instance of those sharing the store does) and deletes
// the retired keys whose tokens have all expired (always), logging what it did.
// A failure is logged at most once a minute (the store may be down for a while)
// and the work is tried again a second later.
func (a *App) keyMaintenance(ctx context.Context) {
	var lastFailure time.Time
	a.keys.Schedule(ctx, time.Duration(a.KeyRotation), keys.MaintainInterval, func(rep keys.Report, err error) {
		for _, k := range rep.Rotated {
			a.logger.Info("signing key rotated on schedule", zap.String("alg", k.Algorithm), zap.String("kid", k.ID))
		}
		if len(rep.Rotated) > 0 {
			a.Events().Emit(ctx, event.Event{Kind: event.KeysRotated, Outcome: event.Scheduled})
		}
		for _, k := range rep.Dropped {
			a.logger.Info("retired signing key dropped: every token it signed has expired",
				zap.String("alg", k.Algorithm), zap.String("kid", k.ID), zap.Time("retired", k.Retired))
		}
		if err != nil && time.Since(lastFailure) >= time.Minute {
			lastFailure = time.Now()
			a.logger.Warn("signing key maintenance failed; retrying", zap.Error(err))
		}
	})
}
