package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/parslee-ai/car-server/internal/jsonvalue"
)

// parseValue decodes the valid JSON value at raw[i:] as encoding/json with
// UseNumber would into an interface, and returns it with the index just
// past it. It walks the bytes once, without reflection; strings with
// escapes or other than UTF-8 are left to encoding/json.
func parseValue(raw []byte, i int) (any, int) {
	return (&valueParser{}).parse(raw, i)
}

// valueParser is parseValue's walk, with its choices.
type valueParser struct {
	// keys, when not nil, shares object keys: the keys of many parameter
	// objects repeat.
	keys map[string]string
	// floats reads numbers as float64, as encoding/json does without
	// UseNumber; else as json.Number.
	floats bool
	// bad is set when a number does not fit a float64, where encoding/json
	// fails.
	bad bool
}

func (p *valueParser) parse(raw []byte, i int) (any, int) {
	i = jsonvalue.SkipSpace(raw, i)
	switch raw[i] {
	case '{':
		m := map[string]any{}
		i = jsonvalue.SkipSpace(raw, i+1)
		if raw[i] == '}' {
			return m, i + 1
		}
		for {
			var key string
			key, i = parseKey(raw, i, p.keys)
			i = jsonvalue.SkipSpace(raw, i)
			var v any
			v, i = p.parse(raw, i+1) // past the colon
			m[key] = v
			i = jsonvalue.SkipSpace(raw, i)
			if raw[i] == '}' {
				return m, i + 1
			}
			i = jsonvalue.SkipSpace(raw, i+1) // past the comma
		}
	case '[':
		a := []any{}
		i = jsonvalue.SkipSpace(raw, i+1)
		if raw[i] == ']' {
			return a, i + 1
		}
		for {
			var v any
			v, i = p.parse(raw, i)
			a = append(a, v)
			i = jsonvalue.SkipSpace(raw, i)
			if raw[i] == ']' {
				return a, i + 1
			}
			i++ // past the comma
		}
	case '"':
		return parseString(raw, i)
	case 't':
		return true, i + 4
	case 'f':
		return false, i + 5
	case 'n':
		return nil, i + 4
	}
	end := i
	for end < len(raw) && isNumberByte(raw[end]) {
		end++
	}
	if !p.floats {
		return json.Number(raw[i:end]), end
	}
	f, err := strconv.ParseFloat(string(raw[i:end]), 64)
	if err != nil {
		p.bad = true
	}
	return f, end
}

// parseKey is parseString through keys, when it is not nil, for strings
// without escapes (whose bytes are their text).
func parseKey(raw []byte, i int, keys map[string]string) (string, int) {
	if keys == nil {
		return parseString(raw, i)
	}
	end := jsonvalue.SkipString(raw, i)
	inner := raw[i+1 : end-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		return parseString(raw, i)
	}
	if k, ok := keys[string(inner)]; ok {
		return k, end
	}
	k, end := parseString(raw, i)
	keys[k] = k
	return k, end
}

// parseString decodes the valid JSON string at raw[i:].
func parseString(raw []byte, i int) (string, int) {
	start, plain := i+1, true
	j := start
	for ; raw[j] != '"'; j++ {
		if raw[j] == '\\' {
			plain = false
			j++
		}
	}
	inner := raw[start:j]
	if plain && utf8.Valid(inner) {
		return string(inner), j + 1
	}
	var s string
	_ = json.Unmarshal(raw[i:j+1], &s) // valid: it cannot fail
	return s, j + 1
}

func isNumberByte(b byte) bool {
	return '0' <= b && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E'
}
