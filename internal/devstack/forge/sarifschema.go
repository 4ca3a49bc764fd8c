package forge

import (
	"bytes"
	_ "embed"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sarifSchemaJSON is the official SARIF 2.1.0 schema (the copy
// internal/domain/report/testdata holds; its README says where it comes
// from), which an upload is validated against, as GitHub does.
//
//go:embed sarif-2.1.0-rtm.5.json
var sarifSchemaJSON []byte

var sarifSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sarifSchemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("sarif-2.1.0.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("sarif-2.1.0.json")
})

// schemaErrors are the ways a log breaks the SARIF 2.1.0 schema (none: nil).
func schemaErrors(log []byte) []string {
	s, err := sarifSchema()
	if err != nil {
		return []string{"the forge's SARIF schema: " + err.Error()}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(log))
	if err != nil {
		return []string{"Unable to parse the SARIF file: " + err.Error()}
	}
	if err := s.Validate(doc); err != nil {
		return []string{"The SARIF file does not match the SARIF 2.1.0 schema: " + strings.Join(strings.Fields(err.Error()), " ")}
	}
	return nil
}
