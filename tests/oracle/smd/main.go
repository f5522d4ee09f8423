// Command smd-oracle runs sequences of server-side applies and updates through the real
// structured-merge-diff library (sigs.k8s.io/structured-merge-diff/v4, as Debian
// packages it) and prints the resulting object and every manager's field set. The test
// suite compares drover-ssa against it (tests/tests/ssa_oracle.rs).
//
// Input (stdin, JSON): {"schema": "<SMD schema YAML>", "type": "<type name>",
// "cases": [{"ops": [{"op": "apply"|"update", "manager": "m", "object": {...},
// "force": true}]}]} (op "set": the object becomes `object` and no manager's fields
// change, as when the server fills in defaults, which nobody owns). Output (stdout, JSON): per case {"object": ..., "managers":
// {"m": <fieldsV1>}, "errors": [null | "message" per op]}. An op that fails changes
// nothing.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/merge"
	"sigs.k8s.io/structured-merge-diff/v4/typed"
)

type op struct {
	Op      string                 `json:"op"`
	Manager string                 `json:"manager"`
	Object  map[string]interface{} `json:"object"`
	Force   bool                   `json:"force"`
}

type input struct {
	Schema string `json:"schema"`
	Type   string `json:"type"`
	Cases  []struct {
		Ops []op `json:"ops"`
	} `json:"cases"`
}

type result struct {
	Object   interface{}                `json:"object"`
	Managers map[string]json.RawMessage `json:"managers"`
	Errors   []*string                  `json:"errors"`
}

// sameVersion converts nothing: every manager writes the same version.
type sameVersion struct{}

func (sameVersion) Convert(o *typed.TypedValue, _ fieldpath.APIVersion) (*typed.TypedValue, error) {
	return o, nil
}
func (sameVersion) IsMissingVersionError(error) bool { return false }

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fail(err)
	}
	parser, err := typed.NewParser(typed.YAMLObject(in.Schema))
	if err != nil {
		fail(err)
	}
	pt := parser.Type(in.Type)
	updater := &merge.Updater{Converter: sameVersion{}}
	const version = fieldpath.APIVersion("v1")
	var out []result
	for _, c := range in.Cases {
		live, err := pt.FromUnstructured(map[string]interface{}{})
		if err != nil {
			fail(err)
		}
		managers := fieldpath.ManagedFields{}
		var errs []*string
		for _, o := range c.Ops {
			obj, err := pt.FromUnstructured(o.Object)
			if err != nil {
				fail(fmt.Errorf("%s: %v", o.Manager, err))
			}
			if o.Op == "set" {
				live = obj
				errs = append(errs, nil)
				continue
			}
			var next *typed.TypedValue
			var mf fieldpath.ManagedFields
			copied := fieldpath.ManagedFields{}
			for k, v := range managers {
				copied[k] = v
			}
			if o.Op == "apply" {
				next, mf, err = updater.Apply(live, obj, version, copied, o.Manager, o.Force)
			} else {
				next, mf, err = updater.Update(live, obj, version, copied, o.Manager)
			}
			if err != nil {
				msg := err.Error()
				errs = append(errs, &msg)
				continue
			}
			errs = append(errs, nil)
			if next != nil {
				live = next
			}
			managers = mf
		}
		r := result{Object: live.AsValue().Unstructured(), Managers: map[string]json.RawMessage{}, Errors: errs}
		for m, vs := range managers {
			b, err := vs.Set().ToJSON()
			if err != nil {
				fail(err)
			}
			r.Managers[m] = b
		}
		out = append(out, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
