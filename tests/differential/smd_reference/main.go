// Command smd-reference answers structured-merge requests with the reference
// implementation of server-side apply (sigs.k8s.io/structured-merge-diff), so
// that the differential tests can run the same operations through it and
// through watchcache's own engine and compare the results.
//
// Design note: one long-lived process serves many requests, one JSON object
// per line on stdin, one JSON answer per line on stdout, in order; starting a
// Go process per request would dominate the test's time. Every request is
// independent (schema, live object and managed fields travel with it); parsed
// schemas are cached by their text because a test sends the same schema for a
// whole sequence of operations. A request that cannot be served yields
// {"error": "..."} and the process goes on; only the end of stdin ends it.
// Apply and update go through merge.Updater with an identity converter, as
// Kubernetes' structuredMergeManager does for a resource served at a single
// version. Numbers keep their JSON kind: an integer literal becomes an int64
// and anything else a float64, as Kubernetes decodes unstructured objects.
//
// It builds in GOPATH mode against the Debian package of the library
// (scripts/install-smd-reference.sh); it uses no API newer than v4.1.2.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"

	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/merge"
	"sigs.k8s.io/structured-merge-diff/v4/typed"
)

// managerEntry is one manager's managed fields, as a request and an answer carry them.
// FieldsV1JSON is the exact text of the field set (Set.ToJSON's bytes, which the object
// form cannot keep: escapes, key order); an answer carries both, a request either, the
// text taking precedence.
type managerEntry struct {
	FieldsV1     json.RawMessage `json:"fieldsV1"`
	FieldsV1JSON string          `json:"fieldsV1JSON,omitempty"`
	APIVersion   string          `json:"apiVersion"`
	Applied      bool            `json:"applied"`
}

type request struct {
	Schema   string                  `json:"schema"`
	Type     string                  `json:"type"`
	Live     json.RawMessage         `json:"live"`
	Managers map[string]managerEntry `json:"managers"`
	Op       string                  `json:"op"`
	Manager  string                  `json:"manager"`
	Object   json.RawMessage         `json:"object"`
	Version  string                  `json:"version"`
	Force    bool                    `json:"force"`
}

type conflict struct {
	Manager string `json:"manager"`
	Path    string `json:"path"`
}

// answer is one reply line: {"object", "managers", "unchanged"} for apply and
// update, {"object"} for merge, {"fieldsV1", "fieldsV1JSON"} for fieldset,
// {"conflicts"} or {"error"}. A map, so that a null object is still written out.
type answer map[string]interface{}

func failure(format string, args ...interface{}) answer {
	return answer{"error": fmt.Sprintf(format, args...)}
}

// identity is the converter of a resource served at one version: every object
// is already at the version asked for.
type identity struct{}

func (identity) Convert(object *typed.TypedValue, _ fieldpath.APIVersion) (*typed.TypedValue, error) {
	return object, nil
}

func (identity) IsMissingVersionError(error) bool { return false }

// parsers caches parsed schemas by their YAML text; it is emptied when it grows
// past parserCacheSize so that a long session cannot grow without bound.
var parsers = map[string]*typed.Parser{}

const parserCacheSize = 256

func parserFor(schemaYAML string) (*typed.Parser, error) {
	if p, ok := parsers[schemaYAML]; ok {
		return p, nil
	}
	p, err := typed.NewParser(typed.YAMLObject(schemaYAML))
	if err != nil {
		return nil, err
	}
	if len(parsers) >= parserCacheSize {
		parsers = map[string]*typed.Parser{}
	}
	parsers[schemaYAML] = p
	return p, nil
}

// decodeValue parses JSON into the unstructured form the library takes, with
// integer literals as int64 and other numbers as float64. Absent or null
// input is nil.
func decodeValue(raw json.RawMessage) (interface{}, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v interface{}
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return fromNumbers(v)
}

func fromNumbers(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %v", t, err)
		}
		return f, nil
	case map[string]interface{}:
		for k, e := range t {
			c, err := fromNumbers(e)
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
		return t, nil
	case []interface{}:
		for i, e := range t {
			c, err := fromNumbers(e)
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
		return t, nil
	default:
		return v, nil
	}
}

func typedValue(pt typed.ParseableType, raw json.RawMessage, what string) (*typed.TypedValue, error) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	tv, err := pt.FromUnstructured(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	return tv, nil
}

func decodeManagers(entries map[string]managerEntry, defaultVersion string) (fieldpath.ManagedFields, error) {
	managers := fieldpath.ManagedFields{}
	for id, entry := range entries {
		set := fieldpath.NewSet()
		fields := []byte(entry.FieldsV1JSON)
		if len(fields) == 0 {
			fields = entry.FieldsV1
		}
		if len(fields) != 0 {
			if err := set.FromJSON(bytes.NewReader(fields)); err != nil {
				return nil, fmt.Errorf("managers[%q].fieldsV1: %v", id, err)
			}
		}
		version := entry.APIVersion
		if version == "" {
			version = defaultVersion
		}
		managers[id] = fieldpath.NewVersionedSet(set, fieldpath.APIVersion(version), entry.Applied)
	}
	return managers, nil
}

func encodeManagers(managers fieldpath.ManagedFields) (map[string]managerEntry, error) {
	out := map[string]managerEntry{}
	for id, versioned := range managers {
		fields, err := versioned.Set().ToJSON()
		if err != nil {
			return nil, fmt.Errorf("managers[%q]: %v", id, err)
		}
		out[id] = managerEntry{
			FieldsV1:     json.RawMessage(fields),
			FieldsV1JSON: string(fields),
			APIVersion:   string(versioned.APIVersion()),
			Applied:      versioned.Applied(),
		}
	}
	return out, nil
}

// sortedConflicts lists the conflicts by manager, each manager's paths in the
// set's own order; the library walks its managers in map order, which varies.
func sortedConflicts(conflicts merge.Conflicts) []conflict {
	out := make([]conflict, 0, len(conflicts))
	for _, c := range conflicts {
		out = append(out, conflict{Manager: c.Manager, Path: c.Path.String()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Manager < out[j].Manager })
	return out
}

func serve(req *request) answer {
	parser, err := parserFor(req.Schema)
	if err != nil {
		return failure("schema: %v", err)
	}
	pt := parser.Type(req.Type)
	if !pt.IsValid() {
		return failure("schema has no type %q", req.Type)
	}
	version := req.Version
	if version == "" {
		version = "v1"
	}
	object, err := typedValue(pt, req.Object, "object")
	if err != nil {
		return failure("%v", err)
	}
	switch req.Op {
	case "fieldset":
		set, err := object.ToFieldSet()
		if err != nil {
			return failure("%v", err)
		}
		fields, err := set.ToJSON()
		if err != nil {
			return failure("%v", err)
		}
		return answer{"fieldsV1": json.RawMessage(fields), "fieldsV1JSON": string(fields)}
	case "merge", "apply", "update":
	default:
		return failure("unknown op %q", req.Op)
	}
	live, err := typedValue(pt, req.Live, "live")
	if err != nil {
		return failure("%v", err)
	}
	if req.Op == "merge" {
		merged, err := live.Merge(object)
		if err != nil {
			return failure("%v", err)
		}
		return answer{"object": merged.AsValue().Unstructured()}
	}
	managers, err := decodeManagers(req.Managers, version)
	if err != nil {
		return failure("%v", err)
	}
	updater := merge.Updater{Converter: identity{}}
	apiVersion := fieldpath.APIVersion(version)
	var result *typed.TypedValue
	if req.Op == "apply" {
		result, managers, err = updater.Apply(live, object, apiVersion, managers, req.Manager, req.Force)
	} else {
		result, managers, err = updater.Update(live, object, apiVersion, managers, req.Manager)
	}
	if err != nil {
		if conflicts, ok := err.(merge.Conflicts); ok {
			return answer{"conflicts": sortedConflicts(conflicts)}
		}
		return failure("%v", err)
	}
	encoded, err := encodeManagers(managers)
	if err != nil {
		return failure("%v", err)
	}
	// Apply answers nil when the object did not change; Kubernetes then keeps the live one.
	unchanged := result == nil
	if unchanged {
		result = live
	}
	return answer{"object": result.AsValue().Unstructured(), "managers": encoded, "unchanged": unchanged}
}

// serveRecovering turns a panic of the library into an error answer, so that
// one bad request does not end the session.
func serveRecovering(req *request) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			a = failure("panic: %v", r)
		}
	}()
	return serve(req)
}

// write sends one answer line. HTML escaping is off so that the fieldsV1 objects keep
// the library's bytes (the encoder would otherwise re-escape <, > and & inside them).
func write(out *bufio.Writer, a answer) error {
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		line.Reset()
		if err := enc.Encode(failure("encoding the answer: %v", err)); err != nil {
			return err
		}
	}
	if _, err := out.Write(line.Bytes()); err != nil {
		return err
	}
	return out.Flush()
}

func main() {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) != 0 {
			var req request
			var a answer
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				a = failure("request: %v", jerr)
			} else {
				a = serveRecovering(&req)
			}
			if werr := write(out, a); werr != nil {
				fmt.Fprintf(os.Stderr, "smd-reference: writing: %v\n", werr)
				os.Exit(1)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "smd-reference: reading: %v\n", err)
			os.Exit(1)
		}
	}
}
