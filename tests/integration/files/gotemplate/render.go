// Reference renderer for the differential test (tests/integration/test_gotemplate_diff.go):
// reads [{"name","text","data"}] as JSON on stdin, renders each with Go's text/template and
// writes [{"out","err"}] on stdout. JSON numbers without '.', 'e' or 'E' become int, others
// float64, as Python's json module reads them.
package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"text/template"
)

type tcase struct {
	Name string          `json:"name"`
	Text string          `json:"text"`
	Data json.RawMessage `json:"data"`
}

type result struct {
	Out string `json:"out"`
	Err string `json:"err"`
}

func convert(v any) any {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := x.Int64(); err == nil {
				return int(i)
			}
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = convert(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = convert(x[k])
		}
		return x
	}
	return v
}

func funcs() template.FuncMap {
	return template.FuncMap{
		"upper": strings.ToUpper,
		"join": func(a []any, sep string) string {
			s := make([]string, len(a))
			for i, v := range a {
				s[i] = v.(string)
			}
			return strings.Join(s, sep)
		},
		"add": func(a, b int) int { return a + b },
	}
}

func main() {
	var cases []tcase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	results := make([]result, len(cases))
	for i, c := range cases {
		dec := json.NewDecoder(bytes.NewReader(c.Data))
		dec.UseNumber()
		var data any
		if err := dec.Decode(&data); err != nil {
			panic(err)
		}
		data = convert(data)
		t, err := template.New(c.Name).Funcs(funcs()).Parse(c.Text)
		if err != nil {
			results[i] = result{Err: err.Error()}
			continue
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			results[i] = result{Out: b.String(), Err: err.Error()}
			continue
		}
		results[i] = result{Out: b.String()}
	}
	json.NewEncoder(os.Stdout).Encode(results)
}
