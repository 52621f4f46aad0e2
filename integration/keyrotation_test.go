package integration

// Scheduled key rotation and retirement (key_rotation): two instances on one
// PostgreSQL database rotate once per interval between them; a token signed by a
// retired key verifies until it expires; the key then leaves the JWKS and the
// database. And `caddy palmgate keys list|rotate` against a running instance.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palmgate/palmgate/internal/pgtest"
	"github.com/palmgate/palmgate/internal/testserver"
)

// retireMargin is keys.RetireMargin: a retired key drops this long after its
// tokens' lifetime.
const retireMargin = time.Minute

// secondRE is an admin API time: RFC 3339 UTC to the second.
var secondRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`)

// listedKey is a key as GET /palmgate/keys (and `keys list --json`) shows it.
type listedKey struct {
	KID       string `json:"kid"`
	Alg       string `json:"alg"`
	State     string `json:"state"`
	Created   string `json:"created"`
	RotatesAt string `json:"rotates_at"`
	RetiredAt string `json:"retired_at"`
	DropsAt   string `json:"drops_at"`
}

type keyList struct {
	KeyRotation string      `json:"key_rotation"`
	Keys        []listedKey `json:"keys"`
}

// adminKeyList reads GET /palmgate/keys of e.
func adminKeyList(t *testing.T, e *env) keyList {
	t.Helper()
	var l keyList
	testserver.Do(t, "GET", "http://"+e.AdminAddr+"/palmgate/keys", nil).ExpectStatus(t, http.StatusOK).Decode(t, &l)
	return l
}

func (l keyList) find(kid string) (listedKey, bool) {
	for _, k := range l.Keys {
		if k.KID == kid {
			return k, true
		}
	}
	return listedKey{}, false
}

func (l keyList) active(alg string) string {
	for _, k := range l.Keys {
		if k.Alg == alg && k.State == "active" {
			return k.KID
		}
	}
	return ""
}

func parseSecond(t *testing.T, what, s string) time.Time {
	t.Helper()
	if !secondRE.MatchString(s) {
		t.Fatalf("%s = %q, want RFC 3339 UTC to the second", what, s)
	}
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("%s = %q: %v", what, s, err)
	}
	return v
}

// TestKeyRotationScheduled: key_rotation 5s on two instances sharing a database.
// The instances between them rotate each algorithm once per interval, never twice
// (consecutive keys are created at least an interval apart, and no more keys
// appear than intervals pass). A token whose key is retired meanwhile verifies on
// both instances until it expires; the key then leaves both JWKS and the database.
func TestKeyRotationScheduled(t *testing.T) {
	t.Parallel()
	const (
		every     = 5 * time.Second
		accessTTL = 20 * time.Second // also the refresh TTL: the ES256 keys' lifetime
	)
	c := newOIDCClient("rotor", "")
	dsn := pgtest.DSN(t)
	portA := testserver.FreePort(t)
	issuer := "http://127.0.0.1:" + strconv.Itoa(portA)
	cf := multiCaddyfile(issuer, dsn, "connect_timeout 5s\nstatement_timeout 5s", []oidcClient{c})
	cf = strings.Replace(cf, "\t\tdev\n", fmt.Sprintf("\t\tdev\n\t\tkey_rotation %s\n\t\taccess_token_ttl %s\n\t\trefresh_token_ttl %s\n",
		every, accessTTL, accessTTL), 1)
	p := &pair{issuer: issuer}
	p.a, p.b = start(t, testserver.Options{Port: portA, Caddyfile: cf}), start(t, testserver.Options{Caddyfile: cf})
	began := time.Now()

	// Watch the active keys of both instances while the test runs.
	var mu sync.Mutex
	seen := map[string]map[string]bool{} // alg -> active kids either instance showed
	stop := make(chan struct{})
	var watchers sync.WaitGroup
	for _, e := range []*env{p.a, p.b} {
		watchers.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				resp, err := testserver.Client.Get("http://" + e.AdminAddr + "/palmgate/keys")
				if err != nil {
					continue
				}
				var l keyList
				err = json.NewDecoder(resp.Body).Decode(&l)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					continue
				}
				mu.Lock()
				for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
					if kid := l.active(alg); kid != "" {
						if seen[alg] == nil {
							seen[alg] = map[string]bool{}
						}
						seen[alg][kid] = true
					}
				}
				mu.Unlock()
			}
		})
	}
	stopWatching := sync.OnceFunc(func() { close(stop); watchers.Wait() })
	t.Cleanup(stopWatching)

	// A token, and the retirement of its key while it is valid. On a slow machine
	// the token may expire before its key is seen retired: then again with a new one.
	var tok tokenSet
	var kid string
	var retired listedKey
	for attempt := 1; ; attempt++ {
		tok = p.a.redeem(t, c, p.loginAt(t, p.a, c, p.a.subject("rot")))
		kid = str(jwtPart(t, tok.access, 0)["kid"])
		exp := time.Unix(int64(jwtPart(t, tok.access, 1)["exp"].(float64)), 0)
		waitFor(t, "the token's key retired", accessTTL+every+30*time.Second, time.Now(), func() string {
			k, ok := adminKeyList(t, p.a).find(kid)
			if !ok || k.State != "retired" {
				return fmt.Sprintf("key %s: %+v", kid, k)
			}
			retired = k
			return ""
		})
		if msgA, msgB := activeAt(t, p.a, c, tok.access), activeAt(t, p.b, c, tok.access); msgA != "" || msgB != "" {
			if time.Now().Before(exp.Add(-time.Second)) {
				t.Fatalf("a valid token signed by the retired key %s is refused: A: %s; B: %s", kid, msgA, msgB)
			}
			if attempt == 3 {
				t.Fatalf("three tokens expired before their key was seen retired: the machine is too slow for this test")
			}
			t.Logf("the token expired before its key was seen retired; again")
			continue
		}
		if !slices.Contains(jwksKIDs(t, p.b), kid) || !slices.Contains(jwksKIDs(t, p.a), kid) {
			t.Fatalf("the JWKS lacks the retired key %s while its token is valid", kid)
		}
		break
	}
	retiredAt := parseSecond(t, "retired_at", retired.RetiredAt)
	dropsAt := parseSecond(t, "drops_at", retired.DropsAt)
	if want := retiredAt.Add(accessTTL + retireMargin); !dropsAt.Equal(want) && !dropsAt.Equal(want.Add(time.Second)) {
		t.Errorf("drops_at %s, want retired_at %s + %s + %s", retired.DropsAt, retired.RetiredAt, accessTTL, retireMargin)
	}

	// The token expires: refused (as any expired token), its key still published.
	exp := time.Unix(int64(jwtPart(t, tok.access, 1)["exp"].(float64)), 0)
	waitFor(t, "the token refused once expired", time.Until(exp)+10*time.Second, time.Now(), func() string {
		return refusedAt(t, p.a, c, tok.access) + refusedAt(t, p.b, c, tok.access)
	})
	if time.Now().Before(dropsAt.Add(-5 * time.Second)) {
		for _, e := range []*env{p.a, p.b} {
			if !slices.Contains(jwksKIDs(t, e), kid) {
				t.Errorf("%s dropped the key %s before drops_at %s", e.URL, kid, retired.DropsAt)
			}
		}
	}

	// Then the key leaves both JWKS, and the database.
	waitFor(t, "the retired key out of both JWKS", time.Until(dropsAt)+15*time.Second, time.Now(), func() string {
		for _, e := range []*env{p.a, p.b} {
			if slices.Contains(jwksKIDs(t, e), kid) {
				return e.URL + " still publishes " + kid
			}
		}
		return ""
	})
	if time.Now().Before(dropsAt.Add(-time.Second)) {
		t.Errorf("the key left the JWKS at %s, before its drops_at %s", time.Now().UTC().Format(time.RFC3339), retired.DropsAt)
	}
	conn := pgConnect(t, dsn)
	waitFor(t, "the retired key deleted from the database", 15*time.Second, time.Now(), func() string {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM palmgate_kv WHERE key = $1`,
			[]byte("keys/ES256/"+kid)).Scan(&n); err != nil {
			return err.Error()
		}
		if n != 0 {
			return "its record is still stored"
		}
		return ""
	})

	// Once per interval: the keys listed (those not dropped, the last ~80 s) were
	// created at least an interval apart (to the second the list shows), and the
	// instances showed no more active keys than intervals passed.
	stopWatching()
	elapsed := time.Since(began)
	l := adminKeyList(t, p.a)
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		var created []time.Time
		for _, k := range l.Keys {
			if k.Alg == alg {
				created = append(created, parseSecond(t, alg+" created", k.Created))
			}
		}
		slices.SortFunc(created, func(a, b time.Time) int { return a.Compare(b) })
		if len(created) < 3 {
			t.Errorf("%d %s keys after %s with key_rotation %s, want several rotations", len(created), alg, elapsed.Round(time.Second), every)
		}
		for i := 1; i < len(created); i++ {
			if gap := created[i].Sub(created[i-1]); gap < every-time.Second {
				t.Errorf("%s keys created %s apart (%s, %s), want an interval (%s, less a second of rounding): two rotations in one interval",
					alg, gap, created[i-1].Format(time.RFC3339), created[i].Format(time.RFC3339), every)
			}
		}
		mu.Lock()
		n := len(seen[alg])
		mu.Unlock()
		if limit := int(elapsed/every) + 2; n > limit {
			t.Errorf("%d active %s keys seen in %s, want at most %d (one per %s)", n, alg, elapsed.Round(time.Second), limit, every)
		}
	}
	// The rotations were logged long ago. The drop is logged once the instance
	// that deleted the key has reloaded its keys after the deletion, which on a
	// busy machine may be after the test saw the record gone: wait for it.
	waitFor(t, "the rotation and the drop logged", 15*time.Second, time.Now(), func() string {
		logA, logB := p.a.Log(), p.b.Log()
		for _, entry := range []string{"signing key rotated on schedule", "retired signing key dropped"} {
			if !strings.Contains(logA+logB, entry) {
				return fmt.Sprintf("neither log has %q (A: %d bytes, %d lines of palmgate; B: %d bytes, %d lines of palmgate)",
					entry, len(logA), strings.Count(logA, `"logger":"palmgate`), len(logB), strings.Count(logB, `"logger":"palmgate`))
			}
		}
		return ""
	})
}

// TestKeysCLI: `caddy palmgate keys list|rotate` against a running instance, and
// the admin routes' errors.
func TestKeysCLI(t *testing.T) {
	t.Parallel()
	// Long lifetimes: no key retired here drops before the test ends, however slow.
	e := start(t, testserver.Options{Global: "access_token_ttl 1h\nrefresh_token_ttl 2h"})
	cli := func(args ...string) (string, error) {
		return e.RunCommand(t, append(append([]string{"palmgate", "keys"}, args...), "--address", e.AdminAddr)...)
	}
	before := adminKeyList(t, e)
	if before.KeyRotation != "off" || len(before.Keys) != 3 {
		t.Fatalf("GET /palmgate/keys = %+v, want key_rotation off and three active keys", before)
	}
	for _, k := range before.Keys {
		parseSecond(t, "created", k.Created)
		if k.State != "active" || k.RetiredAt != "" || k.DropsAt != "" || k.RotatesAt != "" {
			t.Errorf("key %+v: want active, no retirement, no scheduled rotation", k)
		}
	}

	out, err := cli("rotate", "--alg", "ES256")
	if err != nil {
		t.Fatalf("keys rotate --alg ES256: %v\n%s", err, out)
	}
	after := adminKeyList(t, e)
	newES := after.active("ES256")
	if want := "rotated ES256: the active key is now " + newES; strings.TrimSpace(out) != want {
		t.Errorf("keys rotate printed %q, want %q", out, want)
	}
	if after.active("RS256") != before.active("RS256") || after.active("EdDSA") != before.active("EdDSA") {
		t.Error("rotating ES256 rotated another algorithm")
	}
	old, ok := after.find(before.active("ES256"))
	if !ok || old.State != "retired" {
		t.Fatalf("the previous ES256 key: %+v, want listed as retired", old)
	}
	retiredAt, dropsAt := parseSecond(t, "retired_at", old.RetiredAt), parseSecond(t, "drops_at", old.DropsAt)
	if got, want := dropsAt.Sub(retiredAt), 2*time.Hour+retireMargin; got != want && got != want+time.Second {
		t.Errorf("drops_at - retired_at = %s, want the refresh TTL (the longest use of a token) + %s", got, retireMargin)
	}

	out, err = cli("list")
	if err != nil {
		t.Fatalf("keys list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || lines[0] != "key_rotation: off" || !strings.HasPrefix(lines[1], "KID") {
		t.Fatalf("keys list printed:\n%s\nwant key_rotation, a header and four keys", out)
	}
	row := ""
	for _, l := range lines[2:] {
		if strings.HasPrefix(l, old.KID+" ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) != 7 || f[1] != "ES256" || f[2] != "retired" || f[4] != old.RetiredAt || f[5] != old.DropsAt || f[6] != "-" {
		t.Errorf("keys list row of the retired key: %q", row)
	}
	if strings.Contains(out, ".000") || regexp.MustCompile(`:\d\d\.\d`).MatchString(out) {
		t.Errorf("keys list prints fractions of seconds:\n%s", out)
	}

	out, err = cli("rotate", "--json")
	if err != nil || !strings.Contains(out, `"active"`) {
		t.Fatalf("keys rotate --json: %v\n%s", err, out)
	}
	all := adminKeyList(t, e)
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		if all.active(alg) == after.active(alg) || !strings.Contains(out, all.active(alg)) {
			t.Errorf("keys rotate did not rotate %s (or did not print its new kid): %s", alg, out)
		}
	}

	if out, err := cli("rotate", "--alg", "HS256"); err == nil || !strings.Contains(out, "HS256") {
		t.Errorf("keys rotate --alg HS256: %v\n%s; want a failure naming the algorithm", err, out)
	}
	admin := "http://" + e.AdminAddr
	testserver.Do(t, "POST", admin+"/palmgate/keys/rotate", `{"alg":"none"}`, "Content-Type", "application/json").ExpectStatus(t, http.StatusBadRequest)
	testserver.Do(t, "POST", admin+"/palmgate/keys/rotate", `{"algorithm":"ES256"}`, "Content-Type", "application/json").ExpectStatus(t, http.StatusBadRequest)
	testserver.Do(t, "POST", admin+"/palmgate/keys/rotate", `{`, "Content-Type", "application/json").ExpectStatus(t, http.StatusBadRequest)
	testserver.Do(t, "POST", admin+"/palmgate/keys", nil).ExpectStatus(t, http.StatusMethodNotAllowed)
	testserver.Do(t, "GET", admin+"/palmgate/keys/rotate", nil).ExpectStatus(t, http.StatusMethodNotAllowed)
	if n := len(adminKeyList(t, e).Keys); n != 7 {
		t.Errorf("%d keys listed after the refused requests, want 7 (3 active, 4 retired)", n)
	}
}
