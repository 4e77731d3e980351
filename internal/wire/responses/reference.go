package responses

import (
	"errors"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// ItemReference is the block type of an input item
// {"type": "item_reference", "id": "…"}: a reference to an output item of
// a stored response, which OpenAI resolves from its store [G
// ResponseInputItemItemReferenceParam]. The Vercel AI SDK (@ai-sdk/openai
// 3) sends an earlier answer's message this way when store is not false.
// The parser keeps it verbatim (Raw).
const ItemReference = llm.BlockType("item_reference")

// ReferenceID is the id an item_reference block names; "" for any other
// block.
func ReferenceID(b *llm.Block) string {
	if b.Type != ItemReference || len(b.Raw) == 0 {
		return ""
	}
	id, _ := optString(members(b.Raw), "id", "")
	return id
}

// ReferencedResponse returns the id of the response whose output item is
// itemID, when itemID is one this codec wrote for a response object it
// encoded (itemID: a prefix, the response id's tail, "_" and the item's
// place); false for any other id (an upstream's own).
func ReferencedResponse(itemID string) (string, bool) {
	for _, p := range [...]string{"msg_", "fc_", "ctc_", "rs_"} {
		rest, ok := strings.CutPrefix(itemID, p)
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '_')
		if i <= 0 || i == len(rest)-1 || strings.Trim(rest[i+1:], "0123456789") != "" {
			return "", false
		}
		return "resp_" + rest[:i], true
	}
	return "", false
}

var errItemFound = errors.New("found")

// OutputItem finds the output item whose id is id in a response object
// (as served, valid JSON) and returns it as the input item a client would
// send back in its place; false when the object has no such item.
func OutputItem(resp []byte, id string) (llm.Message, bool) {
	var item []byte
	_ = jsonx.EachMember(resp, func(k, v []byte) error {
		if string(k) != `"output"` || len(v) == 0 || v[0] != '[' {
			return nil
		}
		_ = jsonx.EachElement(v, func(_ int, el []byte) error {
			if got, _ := optString(members(el), "id", ""); got == id {
				item = el
				return errItemFound
			}
			return nil
		})
		return errItemFound
	})
	if item == nil {
		return llm.Message{}, false
	}
	m, err := parseItem(item, "output")
	if err != nil || len(m.Content) == 0 || m.Content[0].Type == ItemReference {
		return llm.Message{}, false
	}
	// The id is Keel's, unknown to any upstream: the item goes on as
	// content, as a client that sends it whole would.
	delete(m.Extra, "id")
	return m, true
}
