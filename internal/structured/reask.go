package structured

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// maxPromptViolations caps the violations listed in a re-ask prompt; a
// model fixes the first problems better than a wall of them.
const maxPromptViolations = 20

// RepairPrompt builds the targeted instruction of the single re-ask the
// engine sends when Repair could not make an answer valid: the invalid answer,
// the validator's violations with their JSON pointers, and the schema
// (compacted). It asks for the corrected JSON value alone and for every value
// that was already right — amounts, numbers, dates, identifiers — to be kept
// exactly. The output is deterministic. RepairPrompt is safe for concurrent
// use.
func RepairPrompt(invalid string, v []Violation, schema json.RawMessage) string {
	var sb strings.Builder
	sb.WriteString("Your previous answer is not valid JSON for the required schema.\n\nProblems:\n")
	for i, x := range v {
		if i == maxPromptViolations {
			sb.WriteString("- … and " + strconv.Itoa(len(v)-i) + " more\n")
			break
		}
		sb.WriteString("- ")
		sb.WriteString(x.String())
		sb.WriteByte('\n')
	}
	if len(v) == 0 {
		sb.WriteString("- the answer could not be parsed as JSON\n")
	}
	sb.WriteString("\nPrevious answer:\n<answer>\n")
	sb.WriteString(invalid)
	sb.WriteString("\n</answer>\n")
	if len(schema) > 0 {
		var c bytes.Buffer
		if json.Compact(&c, schema) == nil {
			schema = c.Bytes()
		}
		sb.WriteString("\nRequired JSON Schema:\n")
		sb.Write(schema)
		sb.WriteByte('\n')
	}
	sb.WriteString("\nReply with only the corrected JSON value: no code fences, no commentary. " +
		"Fix only the problems listed. Keep every value that was already correct exactly as written " +
		"(amounts with their currency symbols, numbers, percentages, dates and identifiers byte for byte), " +
		"and do not invent values: if a required value is unknown, the answer must still state only what you know.\n")
	return sb.String()
}
