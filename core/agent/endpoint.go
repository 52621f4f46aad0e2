package agent

import "context"

// The entry points of the registry's endpoints that take an AgentChallenge body:
// one call each from the edge, which parses nothing itself.

// InitRequest is the registration init endpoint: the body parsed and checked
// (ParseChallenge), then Init for the client address.
func (s *Service) InitRequest(ctx context.Context, body []byte, address string) (*Session, error) {
	c, err := ParseChallenge(body)
	if err != nil {
		return nil, err
	}
	return s.Init(ctx, c, address)
}

// VerifySignatureRequest is the signature verification endpoint: the body parsed
// and checked (ParseChallenge, the key's check remembered for a key seen before,
// and its point carried to the verification: one lookup of the key a request),
// then VerifySignature.
func (s *Service) VerifySignatureRequest(ctx context.Context, body []byte) (*SignatureCheck, error) {
	c, err := parseChallenge(body, s.validKeys.point)
	if err != nil {
		return nil, err
	}
	return s.VerifySignature(ctx, c)
}
