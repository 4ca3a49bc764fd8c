package scan

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type positive struct {
	rule   string
	text   string // the blob
	secret string // what the finding's span must cover
}

// extensionPositives has at least one example per extension rule.
func extensionPositives() []positive {
	g := newGen(4)
	var ps []positive
	add := func(rule, before, secret, after string) {
		ps = append(ps, positive{"gitfleet-" + rule, before + secret + after, secret})
	}
	digits := func(n int) string { return g.s("123456789", 1) + g.s(digitChars, n-1) }
	// DER: SEQUENCE (30 82 len) holding the version 3 (02 01 03), then the
	// authenticated safe (30 82 …).
	der := []byte{0x30, 0x82, 0x02, 0x80, 0x02, 0x01, 0x03, 0x30, 0x82}
	for len(der) < 120 {
		der = append(der, byte(g.r.IntN(256)))
	}
	mapboxClaims := base64.RawURLEncoding.EncodeToString([]byte(`{"u":"` + g.s(lowerChars, 8) + `","a":"` + g.s(lowerChars+digitChars, 25) + `"}`))

	add("database-connection-url", "DATABASE_URL=postgres://app:", g.mixed(20), "@db.internal:5432/app\n")
	add("database-connection-url", `uri = "mongodb+srv://svc:`, g.mixed(16), `@cluster0.mongodb.net/db"`)
	add("database-connection-url", "REDIS_URL=redis://:", g.mixed(24), "@cache:6379/0\n")
	add("aws-secret-access-key", "export AWS_SECRET_ACCESS_KEY=", g.s(b64Chars, 40), "\n")
	add("aws-secret-access-key", `<add key="awsSecretAccessKey" value="`, g.s(b64Chars, 40), `" />`)
	add("pkcs12-base64", `{"keystore": "`, base64.StdEncoding.EncodeToString(der), `"}`)
	add("discord-webhook-url", "hook = 'https://discord.com/api/webhooks/", digits(18)+"/"+g.s(urlChars, 68), "'")
	add("discord-bot-token", "DISCORD_BOT_TOKEN=", "M"+g.s(alnumChars, 23)+"."+g.s(urlChars, 6)+"."+g.s(urlChars, 38), "\n")
	add("mapbox-secret-token", "MAPBOX_TOKEN=", "sk."+mapboxClaims+"."+g.s(urlChars, 22), "\n")
	add("doppler-token", "doppler run --token ", "dp.st."+g.s(alnumChars, 43), " -- ./run")
	add("doppler-token", "serviceToken: ", "dp.sa."+g.s(alnumChars, 43), "\n")
	return ps
}

// secretSamples are secrets of many families in the contexts they are found
// in (assignments, headers, URLs): the anchored tests and the benchmarks
// plant them in generated text.
func secretSamples() []positive {
	g := newGen(1)
	var ps []positive
	add := func(rule, before, secret, after string) {
		ps = append(ps, positive{rule, before + secret + after, secret})
	}
	digits := func(n int) string { return g.s("123456789", 1) + g.s(digitChars, n-1) }

	add("aws-access-key-id", "aws_access_key_id = ", "AKIA"+g.s(base32Chars, 16), "\n")
	add("aws-access-key-id", `{"AccessKeyId": "`, "ASIA"+g.s(base32Chars, 16), `"}`)
	add("aws-secret-access-key", "export AWS_SECRET_ACCESS_KEY=", g.s(b64Chars, 40), "\n")
	add("aws-secret-access-key", `  "SecretAccessKey": "`, g.s(b64Chars, 40), `",`)
	add("aws-secret-access-key", "aws_secret_key: ", g.s(b64Chars, 40), "")
	add("gcp-api-key", `const key = "`, "AIza"+g.s(urlChars, 35), `";`)
	add("google-oauth-client-secret", `"client_secret":"`, "GOCSPX-"+g.s(urlChars, 28), `"`)
	add("azure-storage-account-key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=", g.s(b64Chars, 86)+"==", ";EndpointSuffix=core.windows.net")
	add("digitalocean-token", "DIGITALOCEAN_TOKEN=", "dop_v1_"+g.s(hexChars, 64), "\n")
	add("heroku-api-key", "HEROKU_API_KEY=", "HRKU-"+g.s(urlChars, 60), "\n")
	add("heroku-api-key", "heroku_api_key: ", g.s(hexChars, 8)+"-"+g.s(hexChars, 4)+"-"+g.s(hexChars, 4)+"-"+g.s(hexChars, 4)+"-"+g.s(hexChars, 12), "\n")
	add("github-pat", "token: ", "ghp_"+g.mixed(36), "\n")
	add("github-fine-grained-pat", "GH=", "github_pat_"+g.mixed(22)+"_"+g.mixed(59), "\n")
	add("github-oauth-token", "x ", "gho_"+g.mixed(36), " y")
	add("github-user-to-server-token", "x ", "ghu_"+g.mixed(36), " y")
	add("github-server-to-server-token", "x ", "ghs_"+g.mixed(36), " y")
	add("github-refresh-token", "x ", "ghr_"+g.mixed(76), " y")
	add("gitlab-pat", "GITLAB_TOKEN=", "glpat-"+g.s(urlChars, 20), "\n")
	add("gitlab-token", "runner token ", "glrt-"+g.s(urlChars, 20), "\n")
	add("gitlab-token", "deploy ", "gldt-"+g.s(urlChars, 20), "\n")
	add("gitlab-runner-registration-token", "registration_token = ", "GR1348941"+g.s(urlChars, 20), "\n")
	add("npm-access-token", "//registry.npmjs.org/:_authToken=", "npm_"+g.mixed(36), "\n")
	add("pypi-upload-token", "password = ", "pypi-AgEIcHlwaS5vcmc"+g.s(urlChars, 120), "\n")
	add("atlassian-api-token", "JIRA=", "ATATT3"+g.s(urlChars, 186), "\n")
	add("atlassian-api-token", "confluence_api_key = ", g.mixed(24), "\n")
	add("slack-bot-token", "SLACK_BOT_TOKEN=", "xoxb-"+digits(12)+"-"+digits(13)+"-"+g.mixed(24), "\n")
	add("slack-user-token", "SLACK_USER_TOKEN=", "xoxp-"+digits(12)+"-"+digits(12)+"-"+digits(13)+"-"+g.s(hexChars, 32), "\n")
	add("slack-app-token", "SLACK_APP_TOKEN=", "xapp-1-A"+g.s(upperChars+digitChars, 10)+"-"+digits(13)+"-"+g.s(hexChars, 64), "\n")
	add("slack-webhook-url", "url: https://hooks.slack.com/services/", "T"+g.s(upperChars+digitChars, 8)+"/B"+g.s(upperChars+digitChars, 10)+"/"+g.mixed(24), "\n")
	add("discord-webhook-url", "hook = 'https://discord.com/api/webhooks/", digits(18)+"/"+g.s(urlChars, 68), "'")
	add("telegram-bot-token", "TELEGRAM_BOT_TOKEN=", digits(10)+":AA"+g.s(urlChars, 33), "\n")
	add("telegram-bot-token", "curl https://api.telegram.org/bot", digits(9)+":AA"+g.s(urlChars, 33), "/getMe")
	add("twilio-api-key", "TWILIO_ACCOUNT_SID=AC0\nTWILIO_API_KEY=", "SK"+g.s(hexChars, 32), "\n")
	add("sendgrid-api-key", "SENDGRID_API_KEY=", "SG."+g.s(urlChars, 22)+"."+g.s(urlChars, 43), "\n")
	add("mailgun-api-key", "api: ", "key-"+g.s(hexChars, 32), "\n")
	add("mailgun-api-key", "MAILGUN_API_KEY=", g.s(hexChars, 32)+"-"+g.s(hexChars, 8)+"-"+g.s(hexChars, 8), "\n")
	add("stripe-secret-key", "Stripe.api_key = '", "sk_live_"+g.mixed(24), "'")
	add("stripe-restricted-key", "key = '", "rk_live_"+g.mixed(99), "'")
	add("square-access-token", "SQUARE_ACCESS_TOKEN=", "EAAA"+g.s(urlChars, 60), "\n")
	add("square-access-token", "square: ", "sq0atp-"+g.s(urlChars, 22), "\n")
	add("square-oauth-secret", "square secret ", "sq0csp-"+g.s(urlChars, 43), "\n")
	add("shopify-token", "SHOPIFY_ACCESS_TOKEN=", "shpat_"+g.s(hexChars, 32), "\n")
	add("openai-api-key", "OPENAI_API_KEY=", "sk-proj-"+g.s(urlChars, 156), "\n")
	add("openai-api-key", "openai.api_key = \"", "sk-"+g.mixed(20)+"T3BlbkFJ"+g.mixed(20), "\"")
	add("anthropic-api-key", "ANTHROPIC_API_KEY=", "sk-ant-api03-"+g.s(urlChars, 93)+"AA", "\n")
	add("hashicorp-vault-token", "VAULT_TOKEN=", "hvs."+g.s(urlChars, 90), "\n")
	add("terraform-cloud-api-token", "credentials \"app.terraform.io\" { token = \"", g.mixed(14)+".atlasv1."+g.s(urlChars, 67), "\" }")
	add("database-connection-url", "DATABASE_URL=postgres://app:", g.mixed(20), "@db.internal:5432/app\n")
	add("database-connection-url", `uri = "mongodb+srv://svc:`, g.mixed(16), `@cluster0.mongodb.net/db"`)
	add("database-connection-url", "REDIS_URL=redis://:", g.mixed(24), "@cache:6379/0\n")
	add("database-connection-url", "amqp://worker:", g.mixed(18), "@rabbit/vhost")
	add("database-connection-url", "jdbc:mysql://root:", g.mixed(12), "@localhost:3306/app")
	add("age-secret-key", "# created: 2024\n", "AGE-SECRET-KEY-1"+g.s("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58), "\n")
	add("jwt", "Authorization: Bearer ", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."+g.s(urlChars, 43), "\n")

	pemBody := func(lines int) string {
		var b strings.Builder
		for i := 0; i < lines; i++ {
			b.WriteString(g.s(b64Chars, 64))
			b.WriteByte('\n')
		}
		return b.String()
	}
	body := pemBody(20)
	ps = append(ps, positive{"private-key",
		"-----BEGIN RSA PRIVATE KEY-----\n" + body + "-----END RSA PRIVATE KEY-----\n",
		body[:1000]})
	body = pemBody(3)
	ps = append(ps, positive{"private-key",
		"key: |\n  -----BEGIN PRIVATE KEY-----\n" + body + "  -----END PRIVATE KEY-----\n",
		body})
	body = pemBody(4)
	ps = append(ps, positive{"private-key",
		"-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B\n\n" + body + "-----END EC PRIVATE KEY-----\n",
		body})
	body = "b3BlbnNzaC1rZXktdjEAAAAA" + pemBody(6)
	ps = append(ps, positive{"openssh-private-key",
		"-----BEGIN OPENSSH PRIVATE KEY-----\n" + body + "-----END OPENSSH PRIVATE KEY-----\n",
		body})
	body = pemBody(5)
	ps = append(ps, positive{"pgp-private-key",
		"-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\nComment: test\n\n" + body + "=abcd\n-----END PGP PRIVATE KEY BLOCK-----\n",
		body + "=abcd\n"})

	add("generic-secret", `db_password = "`, g.mixed(20), "\"\n")
	add("generic-secret", "API_KEY: ", g.mixed(32), "\n")
	add("generic-secret", `{"client_secret": "`, g.mixed(40), `"}`)
	add("generic-secret", "const authToken = '", g.mixed(28), "';")
	add("generic-secret", "SECRET_KEY := `", g.mixed(30), "`")
	add("generic-secret", "https://api.example.com/v1?access_key=", g.mixed(26), "&x=1")
	return ps
}

// The built-in rules are gitleaks' maintained set, unchanged, plus the
// extension's own rules under ids of their own.
func TestDefaultRuleSet(t *testing.T) {
	rs := mustDefault(t)
	maintained := mustLoad(t, string(maintainedTOML))
	ext := extensionRules(t)
	if rs.Len() != maintained.Len()+len(ext) || maintained.Len() < 200 {
		t.Fatalf("%d built-in rules, want the %d maintained ones plus the %d of the extension", rs.Len(), maintained.Len(), len(ext))
	}
	if MaintainedVersion() != GitleaksVersion {
		t.Errorf("the maintained rules are gitleaks %s, the format implemented %s: upgrade both together", MaintainedVersion(), GitleaksVersion)
	}
	want := fmt.Sprintf("built-in: gitleaks %s default configuration (%d rules) + gitfleet extension (%d rules)", GitleaksVersion, maintained.Len(), len(ext))
	if rs.Source() != want {
		t.Errorf("source %q, want %q", rs.Source(), want)
	}
	if len(rs.Warnings()) != 0 {
		t.Errorf("warnings: %q", rs.Warnings())
	}
	byID := map[string]Rule{}
	for _, r := range rs.Rules() {
		byID[r.ID] = r
	}
	for _, r := range maintained.Rules() {
		if !reflect.DeepEqual(byID[r.ID], r) {
			t.Errorf("maintained rule %s is changed in the built-in set", r.ID)
		}
	}
	for _, id := range ext {
		cr := rs.rules[slices.IndexFunc(rs.rules, func(c *compiledRule) bool { return c.ID == id })]
		switch {
		case !strings.HasPrefix(id, "gitfleet-"):
			t.Errorf("extension rule %s: ids start with gitfleet-, so that none merges into a maintained rule", id)
		case cr.Description == "" || cr.Regex == "" || len(cr.Keywords) == 0:
			t.Errorf("extension rule %s lacks a description, regex or keywords", id)
		case cr.mode != modeAnchored:
			// Otherwise a common keyword makes it a whole-blob search.
			t.Errorf("extension rule %s does not qualify for anchored matching", id)
		}
	}
}

// extensionRules are the ids of the rules extension.toml adds.
func extensionRules(t testing.TB) []string {
	t.Helper()
	fc, err := decodeFile(extensionTOML)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range fc.Rules {
		ids = append(ids, r.ID)
	}
	return ids
}

// Every extension rule finds its examples, with the secret's exact span,
// only because of the secret, and its keywords occur in every match.
func TestExtensionRulesPositive(t *testing.T) {
	rs := mustDefault(t)
	s := newTestScanner(t, rs)
	covered := map[string]bool{}
	for i, p := range extensionPositives() {
		covered[p.rule] = true
		t.Run(fmt.Sprintf("%s/%d", p.rule, i), func(t *testing.T) {
			res := s.Scan("src/config.txt", []byte(p.text), "")
			var hit *Finding
			for j := range res.Findings {
				if res.Findings[j].RuleID == p.rule {
					hit = &res.Findings[j]
				}
				assertNoSecret(t, res.Findings[j], p.secret)
			}
			if hit == nil {
				t.Fatalf("rule %s found nothing in %q; findings: %v", p.rule, p.text, ruleIDs(res.Findings))
			}
			if got := p.text[hit.Start:hit.End]; got != p.secret {
				t.Errorf("secret span = %q, want %q", got, p.secret)
			}
			scrambled := strings.Replace(p.text, p.secret, strings.Repeat("-", len(p.secret)), 1)
			for _, f := range s.Scan("x", []byte(scrambled), "").Findings {
				if f.RuleID == p.rule {
					t.Errorf("still matches without its secret: %q", scrambled)
				}
			}
			cr := rs.rules[slices.IndexFunc(rs.rules, func(c *compiledRule) bool { return c.ID == p.rule })]
			for _, m := range cr.re.FindAllStringIndex(p.text, -1) {
				match := strings.ToLower(p.text[m[0]:m[1]])
				if !slices.ContainsFunc(cr.Keywords, func(k string) bool { return strings.Contains(match, k) }) {
					t.Errorf("match %q contains none of %v", match, cr.Keywords)
				}
			}
		})
	}
	for _, id := range extensionRules(t) {
		if !covered[id] {
			t.Errorf("extension rule %s has no example", id)
		}
	}
}

// Placeholders, references and words that merely look like assignments.
func TestGenericNegatives(t *testing.T) {
	s := newTestScanner(t, mustDefault(t))
	g := newGen(2)
	negatives := []string{
		`password = "changeme"`,
		`password = "changeme1"`,
		`password = "${DB_PASSWORD}"`,
		`DB_PASSWORD=${DB_PASSWORD:-x1}`,
		`token: <placeholder>`,
		`token: <your-token-1>`,
		`secret = "xxxxxxxx"`,
		`secret = "xxxxxxxxxxxxxxxx1"`,
		`api_key = "your_api_key_` + g.mixed(12) + `"`,
		`api_key = "EXAMPLE` + g.mixed(16) + `"`,
		`token = "1234567890123456"`,
		`token = "aaaaaaaaaaaa1"`,
		`password = os.Getenv("PASSWORD_1")`,
		`token := getToken(ctx, 12)`,
		`secret = process.env.SECRET_1`,
		`password: ********`,
		`password: "{{ .Values.db.password1 }}"`,
		`token_count = 42`,
		`password = "short1"`,
		`password = "P@ss1"`,
		`secret_name = "prod/app/db-password-2024"`,
		`tokens = tokenizer.tokenize(text1)`,
	}
	// What the maintained set reports here is gitleaks' call; the extension
	// must add nothing to it.
	maintained := newTestScanner(t, mustLoad(t, string(maintainedTOML)))
	for _, text := range negatives {
		got := s.Scan("app/settings.py", []byte(text+"\n"), "").Findings
		want := maintained.Scan("app/settings.py", []byte(text+"\n"), "").Findings
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: findings %v, the maintained set's %v", text, ruleIDs(got), ruleIDs(want))
		}
	}
}
