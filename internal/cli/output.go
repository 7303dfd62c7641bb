package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/causeway-db/causeway/client"
)

// Output formats.
const (
	formatText = "text"
	formatJSON = "json"
)

// jsonBytes is a key or value in JSON output: a string when it is valid
// UTF-8, otherwise {"base64": "..."}.
type jsonBytes []byte

func (b jsonBytes) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(struct {
		Base64 string `json:"base64"`
	}{base64.StdEncoding.EncodeToString(b)})
}

// jsonVersion is a version in JSON output: the text form kvctl accepts in
// --expect-version, and its parts. Note that hlc exceeds 2^53: read it as
// a 64-bit integer, or use text.
type jsonVersion struct {
	Text string `json:"text"`
	HLC  uint64 `json:"hlc"`
	Site string `json:"site"`
}

func versionJSON(v client.Version) *jsonVersion {
	if v.IsZero() {
		return nil
	}
	return &jsonVersion{Text: v.String(), HLC: v.HLC, Site: v.Site}
}

// writeJSON writes one indented JSON document.
func writeJSON(w io.Writer, doc any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// humanBytes renders a byte count with a binary unit.
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// humanUptime renders seconds as a duration.
func humanUptime(sec uint64) string {
	return (time.Duration(sec) * time.Second).String()
}
