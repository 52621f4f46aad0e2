package jsonobject

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

type body struct {
	DeviceID  *string `json:"deviceId"`
	Timestamp *int64  `json:"timestamp,omitempty"`
	Nonce     string  `json:"nonce"`
	Plain     string
	Skipped   string `json:"-"`
}

func TestDecode(t *testing.T) {
	str := func(s string) *string { return &s }
	i64 := func(n int64) *int64 { return &n }
	tests := []struct {
		name string
		in   string
		want body
	}{
		{"exact keys", `{"deviceId":"a","timestamp":5,"nonce":"n","Plain":"p"}`, body{DeviceID: str("a"), Timestamp: i64(5), Nonce: "n", Plain: "p"}},
		{"empty object", ` { } `, body{}},
		{"case variant is an unknown key", `{"DeviceId":"a","NONCE":"n","plain":"p"}`, body{}},
		{"case variant beside the exact key", `{"deviceId":"a","DEVICEID":"b"}`, body{DeviceID: str("a")}},
		{"case variant before the exact key", `{"DEVICEID":"b","deviceId":"a"}`, body{DeviceID: str("a")}},
		{"unknown keys are ignored", `{"x":1,"y":{"deviceId":"z"},"nonce":"n"}`, body{Nonce: "n"}},
		{"a duplicate inside an ignored value", `{"y":{"a":1,"a":2},"nonce":"n"}`, body{Nonce: "n"}},
		{"an escaped key is its unescaped name", `{"device\u0049d":"a"}`, body{DeviceID: str("a")}},
		{"null leaves a pointer nil", `{"deviceId":null}`, body{}},
		{"tag - is not a key", `{"Skipped":"s","-":"s","hidden":"h"}`, body{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got body
			if err := Decode([]byte(tt.in), &got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tt.want)
			if string(gb) != string(wb) {
				t.Errorf("Decode = %s, want %s", gb, wb)
			}
		})
	}
}

func TestDecodeRefused(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		duplicate string // the key of a *DuplicateError
		typeField string // the Field of a *json.UnmarshalTypeError
		is        error
	}{
		{name: "key twice", in: `{"deviceId":"a","deviceId":"b"}`, duplicate: "deviceId"},
		{name: "key twice, same value", in: `{"nonce":"n","nonce":"n"}`, duplicate: "nonce"},
		{name: "key twice, first null", in: `{"deviceId":null,"deviceId":"b"}`, duplicate: "deviceId"},
		{name: "key twice, escaped", in: `{"nonce":"n","non\u0063e":"m"}`, duplicate: "nonce"},
		{name: "unknown key twice", in: `{"x":1,"x":2}`, duplicate: "x"},
		{name: "duplicate before a type error", in: `{"timestamp":"a","x":1,"x":2}`, duplicate: "x"},
		{name: "wrong type", in: `{"timestamp":"5"}`, typeField: "timestamp"},
		{name: "wrong type, object", in: `{"deviceId":{}}`, typeField: "deviceId"},
		{name: "trailing data", in: `{"nonce":"n"} x`, is: ErrTrailingData},
		{name: "two objects", in: `{}{}`, is: ErrTrailingData},
		{name: "array", in: `[{"nonce":"n"}]`, is: ErrNotObject},
		{name: "null", in: `null`, is: ErrNotObject},
		{name: "string", in: `"x"`, is: ErrNotObject},
		{name: "empty", in: ``},
		{name: "truncated", in: `{"nonce":"n"`},
		{name: "missing value", in: `{"nonce":}`},
		{name: "number key", in: `{1:"n"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got body
			err := Decode([]byte(tt.in), &got)
			if err == nil {
				t.Fatalf("Decode(%s) accepted: %+v", tt.in, got)
			}
			var dup *DuplicateError
			var typeErr *json.UnmarshalTypeError
			switch {
			case tt.duplicate != "":
				if !errors.As(err, &dup) || dup.Name != tt.duplicate {
					t.Errorf("err = %v, want a DuplicateError of %q", err, tt.duplicate)
				}
			case tt.typeField != "":
				if !errors.As(err, &typeErr) || typeErr.Field != tt.typeField {
					t.Errorf("err = %v, want an UnmarshalTypeError of field %q", err, tt.typeField)
				}
			case tt.is != nil:
				if !errors.Is(err, tt.is) {
					t.Errorf("err = %v, want %v", err, tt.is)
				}
			}
		})
	}
}

func TestDecodeNeedsStructPointer(t *testing.T) {
	var m map[string]any
	if err := Decode([]byte(`{}`), &m); err == nil {
		t.Error("Decode into a map accepted")
	}
	var b body
	if err := Decode([]byte(`{}`), b); err == nil {
		t.Error("Decode into a struct value accepted")
	}
}

// FuzzDecodeWalksAsTheDecoder: the in-place walk of a well-formed body decodes
// what encoding/json's Decoder path decodes, and refuses what it refuses with
// the same kind of error.
func FuzzDecodeWalksAsTheDecoder(f *testing.F) {
	for _, s := range []string{
		`{"deviceId":"a","timestamp":5,"nonce":"n","Plain":"p"}`, ` { } `, `{"DEVICEID":"b","deviceId":"a"}`,
		`{"x":1,"y":{"deviceId":"z","q":[1,"]}",{"a":"\"}"}]},"nonce":"n"}`, `{"device\u0049d":"a"}`, `{"deviceId":null}`,
		`{"deviceId":"a","deviceId":"b"}`, `{"nonce":"n","non\u0063e":"m"}`, `{"timestamp":"a","x":1,"x":2}`,
		`{"timestamp":"5"}`, `{"deviceId":{}}`, `[{"nonce":"n"}]`, `null`, `"x"`, "{\"a\xff\":1,\"a\xfe\":2}",
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
		"{\"timestamp\":-1.5e3}", "{\"timestamp\" : 7 ,\n\"nonce\"\t:\"\\u00e9\" }",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // both paths are the Decoder's
		}
		var fast, slow body
		errFast := Decode(data, &fast)
		errSlow := decodeStream(data, reflect.ValueOf(&slow).Elem(), fieldsOf(reflect.TypeFor[body]()))
		if (errFast == nil) != (errSlow == nil) {
			t.Fatalf("%q: walk %v, decoder %v", data, errFast, errSlow)
		}
		if errFast != nil {
			if kind(errFast) != kind(errSlow) {
				t.Fatalf("%q: walk %v, decoder %v", data, errFast, errSlow)
			}
			return
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: walk %+v, decoder %+v", data, fast, slow)
		}
	})
}

// kind is what a caller tells apart in an error of Decode: a duplicate key (by
// name), a field's wrong type (by field), or any other refusal of the body.
func kind(err error) string {
	var dup *DuplicateError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &dup):
		return "duplicate " + dup.Name
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return "type " + typeErr.Field
	}
	return "refused"
}

func BenchmarkDecode(b *testing.B) {
	data := []byte(`{"deviceId":"bench-agent-000123","publicKey":"MCowBQYDK2VwAyEAqNiNpYHXELSrmAVyyRWasQna/chWjsvShyzKJ8gNSHU=",` +
		`"message":"hello from an agent at 1795653972374","signature":"` + strings.Repeat("A", 86) + `==","timestamp":1795653972374}`)
	type challenge struct {
		DeviceID  *string `json:"deviceId"`
		PublicKey *string `json:"publicKey"`
		Message   *string `json:"message"`
		Signature *string `json:"signature"`
		Timestamp *int64  `json:"timestamp"`
	}
	b.ReportAllocs()
	for b.Loop() {
		var c challenge
		if err := Decode(data, &c); err != nil {
			b.Fatal(err)
		}
	}
}

// upper is a string type with its own JSON decoding.
type upper string

func (u *upper) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*u = upper(strings.ToUpper(s))
	return nil
}

// tenfold is an int64 type with its own text decoding.
type tenfold int64

func (n *tenfold) UnmarshalText(b []byte) error {
	v, err := strconv.ParseInt(string(b), 10, 64)
	*n = tenfold(10 * v)
	return err
}

// TestDecodeKeepsUnmarshalers: a field whose type decodes itself is decoded by
// its own method, also when its value is a plain string or integer.
func TestDecodeKeepsUnmarshalers(t *testing.T) {
	var v struct {
		A upper    `json:"a"`
		B *upper   `json:"b"`
		C tenfold  `json:"c"`
		D *tenfold `json:"d"`
		E int64    `json:"e"`
		F *int64   `json:"f"`
	}
	if err := Decode([]byte(`{"a":"x","b":"y","c":"3","d":"4","e":5,"f":-6}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != "X" || v.B == nil || *v.B != "Y" || v.C != 30 || v.D == nil || *v.D != 40 || v.E != 5 || v.F == nil || *v.F != -6 {
		t.Errorf("Decode = %+v", v)
	}
	var big struct {
		N int64 `json:"n"`
	}
	var typeErr *json.UnmarshalTypeError
	if err := Decode([]byte(`{"n":9223372036854775808}`), &big); !errors.As(err, &typeErr) || typeErr.Field != "n" {
		t.Errorf("an int64 out of range: %v, want an UnmarshalTypeError of n", err)
	}
}

// TestDecodeAllocations: a well-formed five-field challenge costs its values
// (a string and a pointer for each of four strings, a pointer for the integer)
// and the list of matched keys: no token, key string or reflection boxing each.
func TestDecodeAllocations(t *testing.T) {
	data := []byte(`{"deviceId":"agent-1","publicKey":"MCowBQYDK2VwAyEAqNiNpYHXELSrmAVyyRWasQna/chWjsvShyzKJ8gNSHU=",` +
		`"message":"hello","signature":"c2ln","timestamp":1795653972374}`)
	var c struct {
		DeviceID  *string `json:"deviceId"`
		PublicKey *string `json:"publicKey"`
		Message   *string `json:"message"`
		Signature *string `json:"signature"`
		Timestamp *int64  `json:"timestamp"`
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := Decode(data, &c); err != nil {
			t.Fatal(err)
		}
	}); n > 11 {
		t.Errorf("Decode allocates %.0f times, want at most 11", n)
	}
}
