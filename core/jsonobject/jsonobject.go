// Package jsonobject decodes request bodies that are one JSON object into a flat
// struct, matching keys to fields exactly.
//
// encoding/json matches keys to fields case-insensitively and keeps the last of
// duplicate keys, so {"deviceId":"a","DEVICEID":"b"} decodes as deviceId "b",
// while a case-sensitive reader in front of palmgate (a gateway, a WAF, the
// agent's own log) sees "a". Decode reads such a body as every case-sensitive
// JSON reader does, and refuses the ambiguous ones: it is the matching of
// encoding/json/v2, which is still behind GOEXPERIMENT.
package jsonobject

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// DuplicateError is the error of an object that holds a key more than once.
type DuplicateError struct {
	Name string // the key
}

func (e *DuplicateError) Error() string { return fmt.Sprintf("key %q appears more than once", e.Name) }

// ErrTrailingData is the error of a body with more than one JSON value.
var ErrTrailingData = errors.New("data after the JSON object")

// ErrNotObject is the error of a body that is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// Decode decodes data, which must be exactly one JSON object, into the struct v
// points to. A key sets the field whose JSON name (its `json` tag, or its Go name
// without one) it equals exactly; any other key, a case variant of a field name
// included, is ignored, as encoding/json ignores unknown keys. A key present twice
// is refused with a *DuplicateError, whatever its values. A value of the wrong type
// is a *json.UnmarshalTypeError whose Field is the key; malformed JSON is a
// *json.SyntaxError or ErrNotObject; a second value is ErrTrailingData. Only the
// top-level keys are checked: values are decoded by encoding/json. Invalid UTF-8
// is the caller's to refuse (encoding/json replaces it).
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("jsonobject: Decode needs a pointer to a struct, not %T", v)
	}
	rv = rv.Elem()
	fields := fieldsOf(rv.Type())
	// A well-formed body (nearly all of them) is walked in place, without
	// encoding/json's Token API (a third of the cost of a signature check's body
	// in a CPU profile); anything else takes the Decoder, whose errors are the
	// ones documented above.
	if json.Valid(data) {
		values, err := scanValid(data, fields.byName)
		if err != nil {
			return err
		}
		return decodeValues(rv, fields, values)
	}
	return decodeStream(data, rv, fields)
}

// value is the raw JSON of one matched key, for struct field number field.
type value struct {
	field int
	raw   []byte
}

// decodeStream is Decode by encoding/json's Decoder: any body, the malformed
// ones included.
func decodeStream(data []byte, rv reflect.Value, fields *structFields) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return ErrNotObject
	}
	var values []value
	seen := make(map[string]struct{}, len(fields.byName))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string) // the decoder allows only strings as keys
		if _, dup := seen[name]; dup {
			return &DuplicateError{Name: name}
		}
		seen[name] = struct{}{}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if i, ok := fields.byName[name]; ok {
			values = append(values, value{i, raw})
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailingData
	}
	return decodeValues(rv, fields, values)
}

// decodeValues decodes each matched value into its field.
func decodeValues(rv reflect.Value, fields *structFields, values []value) error {
	for _, val := range values {
		f := rv.Field(val.field)
		if fields.plain[val.field] && (setPlainString(f, val.raw) || setPlainInt(f, val.raw)) {
			continue
		}
		if err := json.Unmarshal(val.raw, f.Addr().Interface()); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) {
				typeErr.Field = jsonName(rv.Type().Field(val.field))
			}
			return err
		}
	}
	return nil
}

// setPlainString sets a string or *string field (of a plainType) to raw when
// raw is a string with nothing to unescape or replace, as json.Unmarshal would,
// and reports whether it did.
func setPlainString(f reflect.Value, raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return false
	}
	s := string(raw[1 : len(raw)-1])
	switch {
	case f.Kind() == reflect.String:
		f.SetString(s)
	case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String:
		p := reflect.New(f.Type().Elem())
		p.Elem().SetString(s)
		f.Set(p)
	default:
		return false
	}
	return true
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// plainType reports whether json.Unmarshal decodes into a field of type t (or
// into what t points to) by its kind alone, with no method of its own.
func plainType(t reflect.Type) bool {
	for {
		p := reflect.PointerTo(t)
		if t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler) {
			return false
		}
		if t.Kind() != reflect.Pointer {
			return true
		}
		t = t.Elem()
	}
}

// setPlainInt sets an int64 or *int64 field (of a plainType) to raw when raw is
// an integer without fraction or exponent that fits, as json.Unmarshal would,
// and reports whether it did.
func setPlainInt(f reflect.Value, raw []byte) bool {
	t := f.Type()
	if f.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Int64 || bytes.ContainsAny(raw, ".eE") {
		return false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return false // not a number, or out of range: json.Unmarshal says which
	}
	if f.Kind() == reflect.Pointer {
		p := reflect.New(t)
		p.Elem().SetInt(n)
		f.Set(p)
	} else {
		f.SetInt(n)
	}
	return true
}

// structFields are the fields of a struct type that keys can set.
type structFields struct {
	byName map[string]int // field index by exact JSON name
	plain  []bool         // by field index: plainType, so decoded without encoding/json when simple
}

// fieldCache maps a struct type to its structFields.
var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*structFields)
	}
	fs := &structFields{byName: make(map[string]int, t.NumField()), plain: make([]bool, t.NumField())}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if name := jsonName(f); name != "" {
			fs.byName[name] = i
			fs.plain[i] = plainType(f.Type)
		}
	}
	fieldCache.Store(t, fs)
	return fs
}

// jsonName is the name encoding/json gives f, or "" for a field it skips.
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name
	}
	return f.Name
}

// scanValid walks the top-level keys of data, which json.Valid accepted: it
// refuses a body that is not an object and a key given twice, and returns the
// raw values of the keys that name fields, in order.
func scanValid(data []byte, fields map[string]int) ([]value, error) {
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return nil, ErrNotObject
	}
	values := make([]value, 0, len(fields))
	var seenBuf [16][]byte
	seen := seenBuf[:0] // a few keys: a linear search beats a map
	var seenSet map[string]struct{}
	i = skipSpace(data, i+1)
	for data[i] != '}' {
		end := stringEnd(data, i)
		// The key's name: its raw bytes when there is nothing to unescape or
		// replace (no copy), else what encoding/json makes of it.
		name := data[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
			var unescaped string
			if err := json.Unmarshal(data[i:end], &unescaped); err != nil {
				return nil, err
			}
			name = []byte(unescaped)
		}
		if seenSet == nil && len(seen) < len(seenBuf) {
			if slices.ContainsFunc(seen, func(k []byte) bool { return bytes.Equal(k, name) }) {
				return nil, &DuplicateError{Name: string(name)}
			}
			seen = append(seen, name)
		} else {
			if seenSet == nil {
				seenSet = make(map[string]struct{}, 2*len(seen))
				for _, k := range seen {
					seenSet[string(k)] = struct{}{}
				}
			}
			if _, dup := seenSet[string(name)]; dup {
				return nil, &DuplicateError{Name: string(name)}
			}
			seenSet[string(name)] = struct{}{}
		}
		i = skipSpace(data, end) // at the colon
		i = skipSpace(data, i+1) // at the value
		j := valueEnd(data, i)
		if f, ok := fields[string(name)]; ok {
			values = append(values, value{f, data[i:j]})
		}
		i = skipSpace(data, j)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}
	}
	return values, nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at data[i] ('"').
func stringEnd(data []byte, i int) int {
	for i++; ; i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// valueEnd is the index just past the valid JSON value that starts at data[i].
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch data[i] {
			case '"':
				i = stringEnd(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
