package openai

import "github.com/keelmesh/keel/internal/jsonx"

// validJSON and decodeString are the shared fast paths (internal/jsonx).
func validJSON(b []byte) bool { return jsonx.Valid(b) }

func decodeString(s []byte) (string, bool) { return jsonx.DecodeString(s) }
