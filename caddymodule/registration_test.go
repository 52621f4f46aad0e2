package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCaddyfileRegistration pins `registration` and `client_metadata_documents`
// (a file of its own: the golden files are shared).
func TestCaddyfileRegistration(t *testing.T) {
	got, err := adapt(t, "{\n\tpalmgate {\n\t\tregistration open {\n\t\t\tmax_clients 500\n\t\t\tper_network off\n\t\t\tunused 2h\n\t\t}\n"+
		"\t\tclient_metadata_documents on {\n\t\t\tallow_private\n\t\t}\n\t}\n}\n:8080 {\n\tpalmgate\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	var a App
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatal(err)
	}
	if r := a.Registration; r == nil || !r.Open || r.MaxClients != 500 || r.PerNetwork != -1 || r.Unused != 7200e9 {
		t.Fatalf("registration = %+v (JSON %s)", r, got)
	}
	if c := a.ClientMetadataDocuments; c == nil || !c.On || !c.AllowPrivate {
		t.Fatalf("client_metadata_documents = %+v (JSON %s)", c, got)
	}
	if cfg := a.registrationConfig(); !cfg.Open || cfg.MaxPerNetwork != -1 {
		t.Fatalf("core config = %+v", cfg)
	}
	if (&App{}).registrationConfig().Open || (&App{}).clientMetadata() != nil {
		t.Fatal("registration or metadata documents on by default")
	}

	for _, tc := range []struct{ block, want string }{
		{"registration", "registration"},
		{"registration maybe", "registration"},
		{"registration open off", "registration"},
		{"registration open {\n\tmax_clients 0\n}", "max_clients"},
		{"registration open {\n\tper_network many\n}", "per_network"},
		{"registration open {\n\tunused soon\n}", "unused"},
		{"registration open {\n\tcolour blue\n}", "colour"},
		{"client_metadata_documents", "client_metadata_documents"},
		{"client_metadata_documents yes", "client_metadata_documents"},
		{"client_metadata_documents on {\n\tallow_private yes\n}", "allow_private"},
		{"client_metadata_documents on {\n\tallow_everything\n}", "allow_everything"},
	} {
		if _, err := adapt(t, "{\n\tpalmgate {\n\t\t"+tc.block+"\n\t}\n}\n:8080 {\n\tpalmgate\n}\n"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error = %v, want one naming %q", tc.block, err, tc.want)
		}
	}
	bad := &App{Registration: &Registration{Open: true, Unused: 1e9}}
	if err := bad.validateRegistration(); err == nil || !strings.Contains(err.Error(), "unused") {
		t.Errorf("unused 1s: %v", err)
	}
}
