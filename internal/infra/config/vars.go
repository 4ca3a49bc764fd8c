package config

// Vars lists every environment variable Load reads, in the table's order:
// the settings no other reader (Via) takes. A deployment
// (docker-compose.yml, checked by compose_test.go) sets each of them or
// says why not; vars_test.go keeps the list in step with Load.
func Vars() []string {
	var out []string
	for _, s := range Settings() {
		if s.Via == "" {
			out = append(out, s.Name)
		}
	}
	return out
}
