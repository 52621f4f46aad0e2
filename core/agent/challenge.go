package agent

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"

	"github.com/palmgate/palmgate/core/jsonobject"
)

// Bounds of the strings of a challenge.
const (
	MaxDeviceIDLen  = 256
	MaxMessageLen   = 4096
	maxEncodedField = 512
)

// Challenge is a parsed, well-formed AgentChallenge: the agent's proof that it
// controls an Ed25519 key. Parsing checks types and encodings; Verify checks the
// signature.
type Challenge struct {
	DeviceID  string
	PublicKey ed25519.PublicKey
	Message   string
	Signature []byte
	Timestamp int64

	// minusA is the negated point of the key the parse checked, whose bytes
	// were minusAOf: verify uses it, with no second key check or lookup, while
	// PublicKey still holds those bytes. nil for a Challenge built by other means.
	minusA   *edwards25519.Point
	minusAOf [ed25519.PublicKeySize]byte
}

// wireChallenge is the JSON body; pointers tell a missing field from a zero one.
type wireChallenge struct {
	DeviceID  *string `json:"deviceId"`
	PublicKey *string `json:"publicKey"`
	Message   *string `json:"message"`
	Signature *string `json:"signature"`
	Timestamp *int64  `json:"timestamp"`
}

// ParseChallenge decodes and validates an AgentChallenge JSON body: all five fields
// present with the right types, a bounded printable deviceId, an Ed25519 key as
// base64 DER SPKI and a 64-byte base64 signature.
func ParseChallenge(body []byte) (*Challenge, error) {
	return parseChallenge(body, checkedPoint)
}

// parseChallenge is ParseChallenge with keyPoint as the key check (checkedPoint,
// or a Service's memory of the keys it accepted, validKeys.point). The point it
// returns goes with the Challenge to its verification: a key is checked, or
// looked up, once a request.
func parseChallenge(body []byte, keyPoint func(ed25519.PublicKey) (*edwards25519.Point, error)) (*Challenge, error) {
	// encoding/json silently replaces invalid UTF-8 in strings with U+FFFD, which
	// would register (or verify) a deviceId or message other than the one sent.
	if !utf8.Valid(body) {
		return nil, invalid(CodeInvalidBody, "", "body is not valid UTF-8")
	}
	// Field names are matched exactly (a case variant is an unknown key, ignored) and
	// a key given twice is refused: encoding/json alone would read
	// {"deviceId":"a","DEVICEID":"b"} as deviceId "b", a case-sensitive reader as "a".
	var w wireChallenge
	if err := jsonobject.Decode(body, &w); err != nil {
		var typeErr *json.UnmarshalTypeError
		var dupErr *jsonobject.DuplicateError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field != "":
			return nil, invalid(CodeInvalidField, typeErr.Field, "field %s has the wrong type", typeErr.Field)
		case errors.As(err, &dupErr):
			return nil, invalid(CodeInvalidBody, dupErr.Name, "body has the key %q more than once", dupErr.Name)
		case errors.Is(err, jsonobject.ErrTrailingData):
			return nil, invalid(CodeInvalidBody, "", "body has data after the JSON object")
		}
		return nil, invalid(CodeInvalidBody, "", "body is not a JSON object: %v", err)
	}
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"deviceId", w.DeviceID == nil}, {"publicKey", w.PublicKey == nil}, {"message", w.Message == nil},
		{"signature", w.Signature == nil}, {"timestamp", w.Timestamp == nil},
	} {
		if f.missing {
			return nil, invalid(CodeMissingField, f.name, "field %s is required", f.name)
		}
	}
	if err := ValidateDeviceID(*w.DeviceID); err != nil {
		return nil, err
	}
	if *w.Message == "" || len(*w.Message) > MaxMessageLen || !utf8.ValidString(*w.Message) {
		return nil, invalid(CodeInvalidField, "message", "message must be 1 to %d bytes of UTF-8", MaxMessageLen)
	}
	key, err := decodePublicKey(*w.PublicKey)
	if err != nil {
		return nil, err
	}
	minusA, err := keyPoint(key)
	if err != nil {
		return nil, err
	}
	sig, err := decodeBase64(*w.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, invalid(CodeInvalidSignature, "signature", "signature must be %d bytes, base64", ed25519.SignatureSize)
	}
	if *w.Timestamp <= 0 {
		return nil, invalid(CodeInvalidField, "timestamp", "timestamp must be positive milliseconds since the Unix epoch")
	}
	return &Challenge{
		DeviceID: *w.DeviceID, PublicKey: key, Message: *w.Message, Signature: sig, Timestamp: *w.Timestamp,
		minusA: minusA, minusAOf: [ed25519.PublicKeySize]byte(key),
	}, nil
}

// ValidateDeviceID checks that id is 1 to MaxDeviceIDLen bytes of printable UTF-8.
func ValidateDeviceID(id string) error {
	if id == "" || len(id) > MaxDeviceIDLen || !utf8.ValidString(id) || strings.IndexFunc(id, notPrintable) >= 0 {
		return invalid(CodeInvalidField, "deviceId", "deviceId must be 1 to %d bytes of printable UTF-8", MaxDeviceIDLen)
	}
	return nil
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// ParsePublicKey decodes an Ed25519 public key given as DER SubjectPublicKeyInfo in
// standard or URL-safe base64, padded or not, and refuses a key that is not a
// canonically encoded point of large order (see CheckPublicKey).
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	return parsePublicKey(s, CheckPublicKey)
}

func parsePublicKey(s string, checkKey func(ed25519.PublicKey) error) (ed25519.PublicKey, error) {
	edKey, err := decodePublicKey(s)
	if err != nil {
		return nil, err
	}
	if err := checkKey(edKey); err != nil {
		return nil, err
	}
	return edKey, nil
}

// decodePublicKey is ParsePublicKey without the key check.
func decodePublicKey(s string) (ed25519.PublicKey, error) {
	der, err := decodeBase64(s)
	if err != nil {
		return nil, invalid(CodeInvalidPublicKey, "publicKey", "publicKey is not base64")
	}
	return parseSPKI(der)
}

// ed25519SPKIPrefix is the DER of an Ed25519 SubjectPublicKeyInfo before its 32
// key bytes (RFC 8410: SEQUENCE { SEQUENCE { OID 1.3.101.112 }, BIT STRING }),
// the one encoding DER allows.
var ed25519SPKIPrefix = []byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}

// parseSPKI returns the Ed25519 key of a DER SubjectPublicKeyInfo. The one DER
// form of an Ed25519 SPKI is read in place (crypto/x509 answers the same bytes
// for it, at a cost a CPU profile of verify/signature put at 4% of the
// request); anything else is crypto/x509's to parse or refuse.
func parseSPKI(der []byte) (ed25519.PublicKey, error) {
	if len(der) == len(ed25519SPKIPrefix)+ed25519.PublicKeySize && bytes.HasPrefix(der, ed25519SPKIPrefix) {
		return ed25519.PublicKey(der[len(ed25519SPKIPrefix):]), nil
	}
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, invalid(CodeInvalidPublicKey, "publicKey", "publicKey is not a DER SubjectPublicKeyInfo")
	}
	edKey, ok := key.(ed25519.PublicKey)
	if !ok {
		return nil, invalid(CodeInvalidPublicKey, "publicKey", "publicKey must be an Ed25519 key")
	}
	return edKey, nil
}

// CheckPublicKey refuses Ed25519 keys under which signatures can be forged or
// judged differently by different verifiers: a key that is not a point of the
// curve, a non-canonical encoding of a point (y >= p, or x = 0 with the sign bit
// set), and the eight points of small order in any of their fourteen encodings.
//
// The registry verifies with crypto/ed25519, that is by RFC 8032's strict,
// cofactorless rule ([S]B = R + [k]A, S < L, R compared by its encoding), and
// checks keys here, when they are parsed, rather than adopting ZIP-215's
// cofactored rule. Under a small-order key A, [k]A is one of at most eight
// points, so a signature made without any private key verifies for many messages,
// and under the identity key the signature R = identity, S = 0 verifies for every
// message, by either rule: no verification rule saves a registry that accepted
// such a key. Refusing them, and non-canonical encodings, at parse time means
// every key the registry holds names one point in one way, and an honest
// signature verifies, and a forged one fails, the same way in any RFC 8032 or
// ZIP-215 implementation. Keys with a small-order component but a large order
// are not refused: only their own holder can make signatures that cofactored
// and cofactorless verifiers judge differently, and honest key generation never
// produces them.
func CheckPublicKey(key ed25519.PublicKey) error {
	_, err := checkedPoint(key)
	return err
}

// checkedPoint is CheckPublicKey that also returns -A, the negated point of the
// key, which verifyPoint takes: decoding it is a third of what checking a key
// costs, so that a remembered key (validKeys) is verified without decoding it
// again.
func checkedPoint(key ed25519.PublicKey) (*edwards25519.Point, error) {
	if len(key) != ed25519.PublicKeySize {
		return nil, invalid(CodeInvalidPublicKey, "publicKey", "publicKey must be %d bytes", ed25519.PublicKeySize)
	}
	// edwards25519 decodes non-canonical encodings too (as crypto/ed25519 does):
	// re-encoding tells them apart.
	p, err := new(edwards25519.Point).SetBytes(key)
	if err != nil {
		return nil, invalid(CodeInvalidPublicKey, "publicKey", "publicKey is not a point of edwards25519")
	}
	if enc := affineBytes(p); !bytes.Equal(enc[:], key) {
		return nil, invalid(CodeInvalidPublicKey, "publicKey", "publicKey is not canonically encoded")
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
		return nil, invalid(CodeInvalidPublicKey, "publicKey", "publicKey is a point of small order, under which signatures can be forged")
	}
	return p.Negate(p), nil
}

// affineBytes is p.Bytes() for a point SetBytes decoded, whose Z is 1: the
// encoding of y with the sign of x, without the field inversion (about a
// twentieth of a signature verification) that Bytes spends dividing by Z.
// Any other point is Bytes' to encode.
func affineBytes(p *edwards25519.Point) (out [32]byte) {
	X, Y, Z, _ := p.ExtendedCoordinates()
	if Z.Equal(new(field.Element).One()) != 1 {
		return [32]byte(p.Bytes())
	}
	copy(out[:], Y.Bytes())
	out[31] |= byte(X.IsNegative() << 7)
	return out
}

// EncodePublicKey is the canonical form of a key: standard base64 of its DER SPKI.
func EncodePublicKey(key ed25519.PublicKey) string {
	der, _ := x509.MarshalPKIXPublicKey(key) // cannot fail for an Ed25519 key
	return base64.StdEncoding.EncodeToString(der)
}

// decodeBase64 accepts standard and URL-safe alphabets, with or without padding.
func decodeBase64(s string) ([]byte, error) {
	if len(s) == 0 || len(s) > maxEncodedField {
		return nil, errors.New("empty or too long")
	}
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// Verify reports whether the signature is valid for the message and key, by
// RFC 8032's cofactorless rule: S must be below L, and R must be the canonical
// encoding of [S]B - [k]A (crypto/ed25519.Verify's rule, verifyPoint). A key
// CheckPublicKey refuses never verifies anything; ParseChallenge has already
// refused it with invalid_public_key, so this only guards a Challenge built by
// other means.
func (c *Challenge) Verify() bool {
	return c.verify(checkedPoint)
}

// verify is Verify with keyPoint as the key check, which returns the key's
// negated point (validKeys.point remembers it); a Challenge that its parse
// checked already, and whose PublicKey is still the key checked, takes the
// point the parse found.
func (c *Challenge) verify(keyPoint func(ed25519.PublicKey) (*edwards25519.Point, error)) bool {
	minusA := c.minusA
	if minusA == nil || len(c.PublicKey) != ed25519.PublicKeySize || [ed25519.PublicKeySize]byte(c.PublicKey) != c.minusAOf {
		var err error
		if minusA, err = keyPoint(c.PublicKey); err != nil {
			return false
		}
	}
	return verifyPoint(minusA, c.PublicKey, []byte(c.Message), c.Signature)
}

// verifyPoint is crypto/ed25519.Verify (Go 1.26's verifyWithDom, pure Ed25519)
// for a key already decoded: minusA is the negation of the point that key
// encodes. It decides as ed25519.Verify does for every input (FuzzVerifyPoint
// holds the two to the same answers); it exists so that a key seen before costs
// no point decoding.
func verifyPoint(minusA *edwards25519.Point, key ed25519.PublicKey, message, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize || sig[63]&224 != 0 {
		return false
	}
	kh := sha512.New()
	kh.Write(sig[:32])
	kh.Write(key)
	kh.Write(message)
	var digest [sha512.Size]byte
	k, err := edwards25519.NewScalar().SetUniformBytes(kh.Sum(digest[:0]))
	if err != nil {
		return false // cannot happen: the digest is 64 bytes
	}
	S, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	if err != nil {
		return false
	}
	// [S]B = R + [k]A  <=>  [k](-A) + [S]B = R
	R := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(k, minusA, S)
	return bytes.Equal(sig[:32], R.Bytes())
}

// checkRegistrationForm checks the registration rules: message
// `<prefix>-register-<timestamp_ms>` with the same timestamp as the field, a
// timestamp within maxAge of now in either direction, and a valid signature.
func (c *Challenge) checkRegistrationForm(now time.Time, maxAge time.Duration) error {
	// No URL names a path segment "." or "..": clients remove it (RFC 3986
	// 5.2.4), so such an agent could be neither looked up nor removed by the
	// operator. Only new registrations are refused: one made before stays
	// removable by its owner.
	if c.DeviceID == "." || c.DeviceID == ".." {
		return invalid(CodeInvalidField, "deviceId", "deviceId must not be %q: no URL path can name it", c.DeviceID)
	}
	i := strings.LastIndex(c.Message, "-register-")
	if i <= 0 {
		return invalid(CodeInvalidMessage, "message", "message must have the form <prefix>-register-<timestamp_ms>")
	}
	digits := c.Message[i+len("-register-"):]
	ts, err := strconv.ParseInt(digits, 10, 64)
	// Canonical decimal only: "-register-007" is not the form of timestamp 7.
	if err != nil || digits == "" || digits[0] == '+' || digits[0] == '-' || digits != strconv.FormatInt(ts, 10) {
		return invalid(CodeInvalidMessage, "message", "message must end with the timestamp in milliseconds")
	}
	if ts != c.Timestamp {
		return invalid(CodeTimestampMismatch, "timestamp", "the message's timestamp differs from the timestamp field")
	}
	age := now.Sub(time.UnixMilli(c.Timestamp))
	if age > maxAge || age < -maxAge {
		return invalid(CodeTimestampWindow, "timestamp", "timestamp is more than %s away from the server's clock", maxAge)
	}
	if !c.Verify() {
		return invalid(CodeSignatureMismatch, "signature", "signature does not verify for this publicKey and message")
	}
	return nil
}
