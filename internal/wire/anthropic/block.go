package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// parseContent reads a content value that is a string (one text block, isString
// true) or an array of blocks.
func parseContent(path *fpath, v []byte) (blocks []llm.Block, isString bool, err error) {
	blocks, isString, _, err = parseContentN(path, v)
	return blocks, isString, err
}

// parseContentN is parseContent for a value that may run on past its end
// (an array open-ended, as jsonx.WalkMembers passes it); it returns the
// value's length too. The array is walked once: its length is not counted
// first, so the blocks' slice is made at its final size for one block and
// up to four, and grows past that.
func parseContentN(path *fpath, v []byte) (blocks []llm.Block, isString bool, n int, err error) {
	if len(v) > 0 && v[0] == '"' {
		blocks, isString, err = stringContent(path, v)
		return blocks, isString, len(v), err
	}
	if len(v) == 0 || v[0] != '[' {
		return nil, false, 0, errAt(path, "expected a string or an array of content blocks, got %s", jsonx.KindName(v))
	}
	var first llm.Block
	count := 0
	n, err = walkElems(path, v, func(i int, e []byte) (int, error) {
		b, n, err := parseBlockN(joinIndex(path, i), e)
		if err != nil {
			return 0, err
		}
		switch count++; count {
		case 1:
			first = b
		case 2:
			blocks = append(make([]llm.Block, 0, 4), first, b)
		default:
			blocks = append(blocks, b)
		}
		return n, nil
	})
	switch count {
	case 0:
		blocks = []llm.Block{}
	case 1:
		blocks = []llm.Block{first}
	}
	return blocks, false, n, err
}

// stringContent reads content that is a string. It is parseContent's string
// case, apart so that the recursion through parseBlock can skip detach for it.
func stringContent(path *fpath, v []byte) ([]llm.Block, bool, error) {
	s, err := unquote(path, v)
	if err != nil {
		return nil, false, err
	}
	return []llm.Block{{Type: llm.BlockText, Text: s}}, true, nil
}

// blockType finds the "type" member of a block object.
func blockType(path *fpath, v []byte) (string, error) {
	typ, found := "", false
	err := eachMember(path, v, func(k string, val []byte) error {
		if k != "type" {
			return nil
		}
		s, err := unquote(join(path, "type"), val)
		typ, found = s, true
		return err
	})
	if err != nil {
		return "", err
	}
	if !found {
		return "", errAt(join(path, "type"), "field required")
	}
	return typ, nil
}

// leadingType returns the raw value of the "type" member of the block
// object v when it is the block's first member and a string, as the SDKs
// and the API write blocks.
func leadingType(v []byte) ([]byte, bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, false
	}
	i := jsonx.SkipWS(v, 1)
	if !bytes.HasPrefix(v[i:], []byte(`"type"`)) {
		return nil, false
	}
	i = jsonx.SkipWS(v, i+len(`"type"`))
	if i >= len(v) || v[i] != ':' {
		return nil, false
	}
	if i = jsonx.SkipWS(v, i+1); i >= len(v) || v[i] != '"' {
		return nil, false
	}
	return v[i:jsonx.StringEnd(v, i)], true
}

// errTypeAgain stops parseTyped's walk of a block whose type was read from
// its first member at a second "type" member: the last one is the block's
// type (as in blockType), so the block is read again the long way.
var errTypeAgain = errors.New("a second type member")

// parseBlock reads one content block. Types this codec does not model, and
// image blocks whose source is neither base64 nor url, are kept verbatim in
// Block.Raw; unknown members of known types go to Block.Extra.
func parseBlock(path *fpath, v []byte) (llm.Block, error) {
	b, _, err := parseBlockN(path, v)
	return b, err
}

// parseBlockN is parseBlock for a block that may run on past its end; it
// returns the block's length too. A block whose type comes first (and only
// there) is walked once; otherwise blockType finds the type first.
func parseBlockN(path *fpath, v []byte) (llm.Block, int, error) {
	if raw, ok := leadingType(v); ok {
		typ, err := unquote(join(path, "type"), raw)
		if err != nil {
			return llm.Block{}, 0, err
		}
		if b, n, err := parseTyped(path, v, typ, true); err != errTypeAgain {
			return b, n, err
		}
	}
	v = jsonx.Bound(v)
	typ, err := blockType(path, v)
	if err != nil {
		return llm.Block{}, 0, err
	}
	return parseTyped(path, v, typ, false)
}

// parseTyped reads the block v of type typ (parseBlockN's walk). With
// leading set, typ was read from the first member, and a second "type"
// member ends the walk with errTypeAgain.
func parseTyped(path *fpath, v []byte, typ string, leading bool) (llm.Block, int, error) {
	b := llm.Block{Type: llm.BlockType(typ)}
	switch b.Type {
	case llm.BlockText, llm.BlockImage, llm.BlockToolUse, llm.BlockToolResult, llm.BlockThinking, llm.BlockRedactedThinking:
	default:
		b.Raw = json.RawMessage(jsonx.Bound(v))
		return b, len(b.Raw), nil
	}
	unmodelled, sawText, types := false, false, 0
	var nested fpath // the path of tool_result content blocks (see detach)
	n, err := walkMembers(path, v, func(k string, val []byte) (int, error) {
		p := join(path, k)
		var err error
		if k == "content" && b.Type == llm.BlockToolResult {
			if jsonx.IsNull(val) {
				return len(val), nil
			}
			if len(val) > 0 && val[0] == '"' {
				b.Content, b.ContentIsString, err = stringContent(p, val)
				return len(val), err
			}
			var n int
			nested = detach(p)
			b.Content, b.ContentIsString, n, err = parseContentN(&nested, val)
			return n, err
		}
		val = jsonx.Bound(val)
		switch {
		case k == "type":
			if types++; leading && types > 1 {
				return 0, errTypeAgain
			}
		case k == "text" && b.Type == llm.BlockText:
			b.Text, err = unquote(p, val)
			sawText = true
		case k == "id" && b.Type == llm.BlockToolUse:
			b.ID, err = str(p, val)
		case k == "name" && b.Type == llm.BlockToolUse:
			b.Name, err = str(p, val)
		case k == "input" && b.Type == llm.BlockToolUse:
			if len(val) == 0 || val[0] != '{' {
				return 0, errAt(p, "expected an object, got %s", jsonx.KindName(val))
			}
			b.Input = json.RawMessage(val)
		case k == "tool_use_id" && b.Type == llm.BlockToolResult:
			b.ToolUseID, err = str(p, val)
		case k == "is_error" && b.Type == llm.BlockToolResult:
			b.IsError, err = boolean(p, val)
		case k == "source" && b.Type == llm.BlockImage:
			b.Image, err = parseImageSource(p, val)
			unmodelled = err == nil && b.Image == nil
		case k == "thinking" && b.Type == llm.BlockThinking:
			b.Thinking, err = unquote(p, val)
		case k == "signature" && b.Type == llm.BlockThinking:
			b.Signature, err = str(p, val)
		case k == "data" && b.Type == llm.BlockRedactedThinking:
			b.Data, err = unquote(p, val)
		default:
			jsonx.SetMember(&b.Extra, k, val)
		}
		return len(val), err
	})
	if err != nil {
		return llm.Block{}, 0, err
	}
	if unmodelled {
		return llm.Block{Type: b.Type, Raw: json.RawMessage(v[:n])}, n, nil
	}
	switch b.Type {
	case llm.BlockText:
		if !sawText {
			return llm.Block{}, 0, errAt(join(path, "text"), "field required")
		}
	case llm.BlockImage:
		if b.Image == nil {
			return llm.Block{}, 0, errAt(join(path, "source"), "field required")
		}
	case llm.BlockToolUse:
		if b.Input == nil {
			return llm.Block{}, 0, errAt(join(path, "input"), "field required")
		}
	case llm.BlockToolResult:
		if b.ToolUseID == "" {
			return llm.Block{}, 0, errAt(join(path, "tool_use_id"), "field required")
		}
	}
	return b, n, nil
}

// parseImageSource reads an image source. It returns nil (and no error) for
// a source llm.ImageSource cannot hold exactly: a type other than base64
// {media_type, data} or url {url}, or any other member; the caller then keeps
// the block verbatim in Block.Raw.
func parseImageSource(path *fpath, v []byte) (*llm.ImageSource, error) {
	const (
		seenMediaType = 1 << iota
		seenData
		seenURL
		seenOther
	)
	src := &llm.ImageSource{}
	seen := 0
	err := eachMember(path, v, func(k string, val []byte) error {
		if len(val) == 0 || val[0] != '"' {
			if k == "type" {
				return errAt(join(path, k), "expected a string, got %s", jsonx.KindName(val))
			}
			seen |= seenOther
			return nil
		}
		s, err := unquote(join(path, k), val)
		switch k {
		case "type":
			src.Kind = s
		case "media_type":
			src.MediaType, seen = s, seen|seenMediaType
		case "data":
			src.Data, seen = s, seen|seenData
		case "url":
			src.URL, seen = s, seen|seenURL
		default:
			seen |= seenOther
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case src.Kind == "":
		return nil, errAt(join(path, "type"), "field required")
	case src.Kind == "base64" && seen == seenMediaType|seenData,
		src.Kind == "url" && seen == seenURL:
		return src, nil
	}
	return nil, nil
}

// appendContent appends a content value: a plain string when asString and the
// blocks are exactly one plain text block, otherwise an array.
func appendContent(b []byte, path *fpath, bs []llm.Block, asString bool) ([]byte, error) {
	if asString && len(bs) == 1 && isPlainText(&bs[0]) {
		return jsonx.AppendString(b, bs[0].Text), nil
	}
	b = append(b, '[')
	var err error
	for i := range bs {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendBlock(b, joinIndex(path, i), &bs[i]); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

func isPlainText(bl *llm.Block) bool {
	return bl.Type == llm.BlockText && bl.Raw == nil && len(bl.Extra) == 0
}

// appendBlock appends one content block: Raw verbatim when set, otherwise the
// known members in a fixed order followed by Extra sorted by key.
func appendBlock(b []byte, path *fpath, bl *llm.Block) ([]byte, error) {
	if bl.Raw != nil {
		return appendRaw(b, path, bl.Raw)
	}
	var err error
	b = append(b, `{"type":`...)
	b = jsonx.AppendString(b, string(bl.Type))
	switch bl.Type {
	case llm.BlockText:
		b = append(b, `,"text":`...)
		b = jsonx.AppendString(b, bl.Text)
	case llm.BlockImage:
		b = append(b, `,"source":`...)
		src := bl.Image
		if src == nil {
			src = &llm.ImageSource{}
		}
		b = append(b, `{"type":`...)
		b = jsonx.AppendString(b, src.Kind)
		switch src.Kind {
		case "url":
			b = append(b, `,"url":`...)
			b = jsonx.AppendString(b, src.URL)
		default:
			b = append(b, `,"media_type":`...)
			b = jsonx.AppendString(b, src.MediaType)
			b = append(b, `,"data":`...)
			b = jsonx.AppendString(b, src.Data)
		}
		b = append(b, '}')
	case llm.BlockToolUse:
		b = append(b, `,"id":`...)
		b = jsonx.AppendString(b, bl.ID)
		b = append(b, `,"name":`...)
		b = jsonx.AppendString(b, bl.Name)
		b = append(b, `,"input":`...)
		if len(bl.Input) == 0 {
			b = append(b, "{}"...)
		} else if b, err = appendRaw(b, join(path, "input"), bl.Input); err != nil {
			return b, err
		}
	case llm.BlockToolResult:
		b = append(b, `,"tool_use_id":`...)
		b = jsonx.AppendString(b, bl.ToolUseID)
		if bl.Content != nil {
			b = append(b, `,"content":`...)
			if bl.ContentIsString && len(bl.Content) == 1 && isPlainText(&bl.Content[0]) {
				b = jsonx.AppendString(b, bl.Content[0].Text) // appendContent's string case, without detach
			} else {
				d := detach(join(path, "content"))
				if b, err = appendContent(b, &d, bl.Content, bl.ContentIsString); err != nil {
					return b, err
				}
			}
		}
		if bl.IsError {
			b = append(b, `,"is_error":true`...)
		}
	case llm.BlockThinking:
		b = append(b, `,"thinking":`...)
		b = jsonx.AppendString(b, bl.Thinking)
		b = append(b, `,"signature":`...)
		b = jsonx.AppendString(b, bl.Signature)
	case llm.BlockRedactedThinking:
		b = append(b, `,"data":`...)
		b = jsonx.AppendString(b, bl.Data)
	}
	if b, err = appendExtra(b, path, bl.Extra); err != nil {
		return b, err
	}
	return append(b, '}'), nil
}
