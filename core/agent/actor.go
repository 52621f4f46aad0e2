package agent

import (
	"context"
	"crypto/ed25519"
	"fmt"
)

// AgentKey returns the Ed25519 key of the agent registered under deviceID and the
// human it is registered to, or a nil key when no agent is registered under it
// (an invalid deviceId included). It is what an agent's signed token request
// (the jwt-bearer grant of core/oidc) is checked with; like LookupDevice, it
// remembers a registered agent until a removal is seen, so a removed agent's key
// stops working at once on this instance and within the freshness bound on others.
func (s *Service) AgentKey(ctx context.Context, deviceID string) (ed25519.PublicKey, string, error) {
	if ValidateDeviceID(deviceID) != nil {
		return nil, "", nil
	}
	r, err := s.registeredDevice(ctx, deviceID)
	if err != nil || r == nil {
		return nil, "", err
	}
	key, err := decodePublicKey(r.PublicKey)
	if err != nil {
		return nil, "", fmt.Errorf("decoding the key of agent %q: %w", deviceID, err)
	}
	// Checked at registration, but a key registered before keys were checked (a
	// point of small order, under which anyone can sign) is no agent's key, as
	// verify/signature refuses it; a checked key is remembered (validKeys).
	if _, err := s.validKeys.point(key); err != nil {
		return nil, "", nil
	}
	return key, r.HumanID, nil
}

// registeredDevice is the record of the agent deviceID (nil when none), from the
// cache of registered agents while no removal was seen, else from the store.
func (s *Service) registeredDevice(ctx context.Context, deviceID string) (*Registered, error) {
	epoch := s.fresh.epoch.Load()
	if r, ok := s.registered.get(deviceID); ok {
		if err := s.fresh.usable(ctx); err != nil {
			return nil, err
		}
		if s.fresh.epoch.Load() == epoch { // not emptied meanwhile
			return r, nil
		}
	}
	stamp := s.fresh.stamp(ctx)
	r, err := s.readRegistered(ctx, deviceID)
	if err != nil {
		return nil, err
	}
	if r != nil {
		s.registered.put(deviceID, r, stamp)
	}
	return r, nil
}
