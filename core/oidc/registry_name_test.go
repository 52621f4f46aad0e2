package oidc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/palmgate/palmgate/core/palm"
	"github.com/palmgate/palmgate/storage"
)

// TestClientNames (issue 18, finding 5): a dynamic client's name cannot hide
// characters, reverse its text, or pass for the operator's service or one of its
// applications.
func TestClientNames(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	refused := map[string]string{
		"bidi override":                "x\u202egnp.exe",
		"bidi isolate":                 "Shop\u2066 App",
		"left-to-right mark":           "Shop\u200e",
		"zero-width space":             "Sh\u200bop",
		"zero-width joiner":            "Sh\u200dop",
		"byte order mark":              "\ufeffShop",
		"soft hyphen":                  "Sh\u00adop",
		"tag character":                "Shop\U000E0041",
		"private use":                  "Shop \ue000",
		"NUL":                          "Shop\x00",
		"escape":                       "Shop\x1b[31m",
		"tab":                          "Shop\tApp",
		"line separator":               "Shop\u2028App",
		"no-break space":               "Shop\u00a0App",
		"ideographic space":            "Shop\u3000App",
		"hangul filler":                "Shop\u3164",
		"braille blank":                "\u2800\u2800",
		"stacked combining marks":      "Sho\u0301\u0302\u0303\u0304p",
		"unassigned":                   "Shop\U0002FFFF",
		"punctuation only":             "---",
		"the portal's name":            "palmgate developer portal",
		"palmgate":                     "Palmgate",
		"palmgate inside a word":       "MyPalmgateLogin",
		"palmgate split":               "Palm-Gate Sign In",
		"palmgate fullwidth":           "ｐａｌｍｇａｔｅ",
		"palmgate math bold":           "𝐩𝐚𝐥𝐦𝐠𝐚𝐭𝐞",
		"portal":                       "Acme Portal",
		"admin":                        "Admin",
		"admin with punctuation":       "acme/admin!",
		"admin before a hyphen":        "Admin-less Blog",
		"administrator":                "Administrator login",
		"operator":                     "Operator",
		"a static client's name":       "Example App",
		"a static client's name again": "  example-APP ",
		"a static client's id":         "es-app",
	}
	for name, n := range refused {
		_, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr(n), RedirectURIs: []string{appRedirect}, Owner: "dev-" + name})
		if !errors.Is(err, ErrClientInvalid) || !strings.Contains(err.Error(), "name") {
			t.Errorf("%s: create named %+q = %v, want ErrClientInvalid about the name", name, n, err)
		}
	}
	ci, _ := h.createClient(t, "dev", appRedirect)
	if _, err := h.svc.Clients().Update(ctx, ci.ID, "dev", ClientSpec{Name: ptr("palmgate developer portal")}); !errors.Is(err, ErrClientInvalid) {
		t.Errorf("renaming to the portal's name = %v, want ErrClientInvalid", err)
	}
	accepted := []string{
		"Shop", "Acme Shop", "Example App 2", "Ünïcödé Café", "東京ショップ", "متجر", "Badminton Club", "Portals of Time",
		"Transportal", "e\u0301clair", "Shop 🛒", "Palm Reading", "Gate Keeper",
	}
	for _, n := range accepted {
		if _, _, err := h.svc.Clients().Create(ctx, ClientSpec{Name: ptr(n), RedirectURIs: []string{appRedirect}}); err != nil {
			t.Errorf("create named %+q: %v, want it accepted", n, err)
		}
	}
}

// TestSelfRegisteredLogin (issue 18, finding 5): the palm challenge of a login to
// an application a developer registered says so; one to an application of the
// operator (static, or created through the admin API) does not.
func TestSelfRegisteredLogin(t *testing.T) {
	h := newHarness(t)
	dev, _ := h.createClient(t, "dev-1", appRedirect)
	operator, _ := h.createClient(t, "", appRedirect)
	for _, tc := range []struct {
		client string
		self   bool
	}{{dev.ID, true}, {operator.ID, false}, {"app", false}} {
		ar := h.authorize(t, params("client_id", tc.client))
		st, err := h.svc.Login(context.Background(), ar.ID, testBinding, false)
		if err != nil {
			t.Fatalf("Login: %v", err)
		}
		req := st.Challenge.Request
		if req.SelfRegistered != tc.self || (req.ClientNotice == palm.SelfRegisteredNotice) != tc.self {
			t.Errorf("client %s: selfRegistered %v, notice %q; want self-registered %v", tc.client, req.SelfRegistered, req.ClientNotice, tc.self)
		}
	}
}

// TestStoredNameBeforeTheRules (issue 18, finding 5): an application whose stored
// name breaks today's rules (registered before them) is shown by its client_id at
// login, on the page and in the scan URL's JSON, not by that name.
func TestStoredNameBeforeTheRules(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ci, _ := h.createClient(t, "dev-1", appRedirect)
	err := h.store.Update(ctx, func(txn storage.Txn) error {
		rec, err := readClient(txn, ci.ID)
		if err != nil {
			return err
		}
		rec.Name = "palmgate developer portal\u202e"
		return h.svc.clients.writeClient(txn, rec, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	ar := h.authorize(t, params("client_id", ci.ID))
	st, err := h.svc.Login(ctx, ar.ID, testBinding, false)
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	if got := st.Challenge.Request.ClientName; got != ci.ID {
		t.Errorf("scan URL clientName %q, want the client_id %s", got, ci.ID)
	}
	if got := h.svc.ClientName(ar); got != ci.ID {
		t.Errorf("ClientName %q, want the client_id %s", got, ci.ID)
	}
}
