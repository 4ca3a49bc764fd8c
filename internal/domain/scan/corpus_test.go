package scan

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// gitfleet's own labelled corpus: for each family of secrets,
// true samples in realistic contexts (code, .env, YAML, JSON, XML, shell)
// and false samples (placeholders, documented public example keys, low
// entropy values, variable references), written from the providers'
// documented token formats. Secrets are generated at run time from a prefix
// and a deterministic pseudo-random body, so that this file holds no
// token-shaped literal.

type corpusSample struct {
	family string // the family of the secret, or that the false sample imitates
	path   string
	text   string
	secret string // the secret in text; "" for a file found by its path alone
	isTrue bool
	gap    string // a known limit of the default rules: its miss is logged, not failed
}

// corpusFamilies names each family and the rule-ID fragments of the rules
// that belong to it, in gitfleet's and in gitleaks' default sets.
var corpusFamilies = map[string][]string{
	"adobe":         {"adobe"},
	"age":           {"age-secret"},
	"anthropic":     {"anthropic"},
	"atlassian":     {"atlassian"},
	"authress":      {"authress"},
	"aws":           {"aws-access", "aws-secret"},
	"aws-bedrock":   {"bedrock"},
	"azure-ad":      {"azure-ad"},
	"azure-storage": {"azure-storage"},
	"curl":          {"curl"},
	"database-url":  {"database"},
	"digitalocean":  {"digitalocean"},
	"discord":       {"discord"},
	"doppler":       {"doppler"},
	"dynatrace":     {"dynatrace"},
	"gcp":           {"gcp", "google"},
	"generic":       {"generic"},
	"github":        {"github"},
	"gitlab":        {"gitlab"},
	"harness":       {"harness"},
	"heroku":        {"heroku"},
	"huggingface":   {"huggingface"},
	"jwt":           {"jwt"},
	"mailgun":       {"mailgun"},
	"mapbox":        {"mapbox"},
	"notion":        {"notion"},
	"npm":           {"npm"},
	"nuget":         {"nuget"},
	"openai":        {"openai"},
	"pkcs12":        {"pkcs12"},
	"private-key":   {"private-key"},
	"pypi":          {"pypi"},
	"sendgrid":      {"sendgrid"},
	"shopify":       {"shopify"},
	"sidekiq":       {"sidekiq"},
	"slack":         {"slack"},
	"snyk":          {"snyk"},
	"sonarqube":     {"sonar"},
	"sourcegraph":   {"sourcegraph"},
	"square":        {"square"},
	"stripe":        {"stripe"},
	"teams-webhook": {"teams"},
	"telegram":      {"telegram"},
	"terraform":     {"terraform", "hashicorp-tf"},
	"twilio":        {"twilio"},
	"vault":         {"vault"},
}

func defaultCorpus() []corpusSample {
	g := newGen(12)
	var cs []corpusSample
	// pos adds a true sample: before + secret + after, at path.
	pos := func(fam, path, before, secret, after string) {
		cs = append(cs, corpusSample{fam, path, before + secret + after, secret, true, ""})
	}
	// neg adds a false sample.
	neg := func(fam, path, text string) {
		cs = append(cs, corpusSample{fam, path, text, "", false, ""})
	}
	// ctx adds one true sample per common context: .env, YAML, JSON, code
	// (Go, Python, JavaScript) and XML, with the variable name in the
	// spelling each uses.
	ctx := func(fam, name, secret string) {
		up := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		low := strings.ToLower(strings.ReplaceAll(name, "-", "_"))
		camel := camelCase(low)
		pos(fam, ".env", "# service\n"+up+"=", secret, "\nDEBUG=false\n")
		pos(fam, "config/app.yaml", "service:\n  "+low+": ", secret, "\n  timeout: 30s\n")
		pos(fam, "settings.json", "{\n  \""+camel+"\": \"", secret, "\",\n  \"retries\": 3\n}\n")
		pos(fam, "main.go", "package main\n\nconst "+camel+" = \"", secret, "\"\n")
		pos(fam, "app.py", "import os\n\n"+up+" = '", secret, "'\n")
		pos(fam, "src/client.js", "const client = new Client({ "+camel+": \"", secret, "\" });\n")
		pos(fam, "web.config", "<configuration>\n  <appSettings>\n    <add key=\""+camel+"\" value=\"", secret, "\" />\n  </appSettings>\n</configuration>\n")
	}
	hex := func(n int) string { return g.s(hexChars, n) }
	uuid := func() string { return hex(8) + "-" + hex(4) + "-" + hex(4) + "-" + hex(4) + "-" + hex(12) }
	digits := func(n int) string { return g.s("123456789", 1) + g.s(digitChars, n-1) }
	lowerAlnum := lowerChars + digitChars
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	b64url := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

	// ---- AWS ----
	ctx("aws", "aws_access_key_id", "AKIA"+g.s(base32Chars, 16))
	pos("aws", "creds.json", `{"AccessKeyId": "`, "ASIA"+g.s(base32Chars, 16), `", "Expiration": "2025-01-01"}`)
	ctx("aws", "aws_secret_access_key", g.s(b64Chars, 40))
	pos("aws", ".aws/credentials", "[default]\naws_access_key_id = AKIA"+g.s(base32Chars, 16)+"\naws_secret_access_key = ", g.s(b64Chars, 40), "\n")
	neg("aws", "README.md", "aws_access_key_id = AKIA"+"IOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY"+"EXAMPLEKEY\n")
	neg("aws", ".env", "AWS_ACCESS_KEY_ID=AKIA"+strings.Repeat("X", 16)+"\nAWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}\n")
	neg("aws", "docs/setup.md", "aws_secret_access_key: <your-secret-access-key>\n")
	ctx("aws-bedrock", "aws_bearer_token_bedrock", "ABSK"+b64("BedrockAPIKey-"+g.s(lowerAlnum, 4)+"-at-"+digits(12)+":"+g.s(b64Chars, 60)))
	pos("aws-bedrock", "run.sh", "export AWS_BEARER_TOKEN_BEDROCK=", "bedrock-api-key-"+b64("bedrock.amazonaws.com/?Action=CallWithBearerToken&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIA"+g.s(base32Chars, 16)+"%2F20250101%2Fus-east-1%2Fbedrock%2Faws4_request&X-Amz-Signature="+hex(64)+"&Version=1"), "\n")
	neg("aws-bedrock", "docs/bedrock.md", "export AWS_BEARER_TOKEN_BEDROCK=${BEDROCK_API_KEY}\n")
	neg("aws-bedrock", "docs/bedrock.md", "AWS_BEARER_TOKEN_BEDROCK=<bedrock-api-key>\n")

	// ---- Google ----
	ctx("gcp", "google_api_key", "AIza"+g.s(urlChars, 35))
	pos("gcp", "res/values/strings.xml", `<resources><string name="google_maps_key">`, "AIza"+g.s(urlChars, 35), "</string></resources>\n")
	pos("gcp", "client_secret.json", `{"installed":{"client_id":"123.apps.googleusercontent.com","client_secret":"`, "GOCSPX-"+g.s(urlChars, 28), `"}}`)
	neg("gcp", "README.md", "GOOGLE_API_KEY=AIza"+strings.Repeat("x", 35)+"\n")
	neg("gcp", "README.md", "GOOGLE_API_KEY=your-google-api-key\n")

	// ---- Azure ----
	pos("azure-storage", "appsettings.json", `{"Storage": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=`, g.s(b64Chars, 86)+"==", `;EndpointSuffix=core.windows.net"}`)
	pos("azure-storage", ".env", "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=x;AccountKey=", g.s(b64Chars, 86)+"==", "\n")
	neg("azure-storage", "local.settings.json", `{"AzureWebJobsStorage": "UseDevelopmentStorage=true"}`)
	neg("azure-storage", "README.md", "AccountKey=<storage-account-key>\n")
	azureAD := func() string {
		return g.s(alnumChars+"_~.", 3) + g.s(digitChars, 1) + "Q~" + g.s(alnumChars+"_~.-", 34)
	}
	ctx("azure-ad", "azure_client_secret", azureAD())
	pos("azure-ad", "Startup.cs", `var cred = new ClientSecretCredential(tenantId, clientId, "`, azureAD(), `");`)
	pos("azure-ad", "Program.cs", `config.AddInMemoryCollection(new Dictionary<string, string> { {"ClientSecret", "`, azureAD(), `"} });`)
	neg("azure-ad", "appsettings.json", `{"AzureAd": {"ClientSecret": "<client-secret>", "ClientId": "`+uuid()+`"}}`)
	neg("azure-ad", ".env", "AZURE_CLIENT_SECRET=${AZURE_CLIENT_SECRET}\n")

	// ---- cloud platforms ----
	ctx("digitalocean", "digitalocean_token", "dop_v1_"+hex(64))
	pos("digitalocean", "auth.json", `{"refresh_token": "`, "dor_v1_"+hex(64), `"}`)
	neg("digitalocean", "README.md", "DIGITALOCEAN_TOKEN=dop_v1_"+strings.Repeat("0", 64)+"\n")
	ctx("heroku", "heroku_api_key", "HRKU-"+g.s(urlChars, 60))
	pos("heroku", ".netrc", "machine api.heroku.com\n  login me@example.com\n  password ", "HRKU-"+g.s(urlChars, 60), "\n")
	pos("heroku", ".env", "HEROKU_API_KEY=", uuid(), "\n")
	neg("heroku", "app.json", `{"env": {"HEROKU_API_KEY": {"required": true}}}`)

	// ---- source forges and package registries ----
	for _, p := range []string{"ghp_", "gho_", "ghu_", "ghs_"} {
		pos("github", ".env", "GITHUB_TOKEN=", p+g.mixed(36), "\n")
	}
	pos("github", ".github/workflows/ci.yml", "env:\n  GH_TOKEN: ", "ghr_"+g.mixed(76), "\n")
	ctx("github", "github_token", "github_pat_"+g.mixed(22)+"_"+g.mixed(59))
	pos("github", "deploy.sh", "git clone https://x-access-token:", "ghs_"+g.mixed(36), "@github.com/org/repo.git\n")
	neg("github", "README.md", "GITHUB_TOKEN=ghp_"+strings.Repeat("x", 36)+"\n")
	neg("github", ".github/workflows/ci.yml", "env:\n  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\n")

	ctx("gitlab", "gitlab_token", "glpat-"+g.s(urlChars, 20))
	pos("gitlab", ".env", "GITLAB_TOKEN=", "glpat-"+g.s(urlChars, 27)+"."+g.s(lowerAlnum, 2)+"."+g.s(lowerAlnum, 7), "\n")
	pos("gitlab", "config.toml", "[[runners]]\n  token = \"", "glrt-t1_"+g.s(urlChars, 27)+"."+g.s(lowerAlnum, 2)+"."+g.s(lowerAlnum, 7), "\"\n")
	for _, p := range []string{"gldt-", "glcbt-", "glft-", "glsoat-", "glffct-", "glimt-"} {
		pos("gitlab", ".gitlab-ci.yml", "variables:\n  TOKEN: ", p+g.s(urlChars, 25), "\n")
	}
	pos("gitlab", "oauth.env", "GITLAB_OAUTH_SECRET=", "gloas-"+g.s(hexChars, 64), "\n")
	pos("gitlab", "agent.yaml", "agent_token: ", "glagent-"+g.s(urlChars, 50), "\n")
	pos("gitlab", "trigger.sh", "curl -X POST -F token=", "glptt-"+hex(40), " -F ref=main https://gitlab.example.com/api/v4/projects/1/trigger/pipeline\n")
	pos("gitlab", "register.sh", "gitlab-runner register --registration-token ", "GR1348941"+g.s(urlChars, 20), "\n")
	pos("gitlab", "scrape.py", "cookies = {'_gitlab_session': 'x'}\nheaders = {'Cookie': '_gitlab_session=", hex(32), "'}\n")
	pos("gitlab", "api.sh", `curl --header "PRIVATE-TOKEN: `, "glpat-"+g.s(urlChars, 20), `" https://gitlab.example.com/api/v4/projects`+"\n")
	neg("gitlab", "README.md", "GITLAB_TOKEN=glpat-xxxxxxxxxxxxxxxxxxxx\n")
	neg("gitlab", "README.md", `curl --header "PRIVATE-TOKEN: <your_access_token>" https://gitlab.example.com/api/v4/projects`+"\n")

	ctx("npm", "npm_token", "npm_"+g.mixed(36))
	pos("npm", ".npmrc", "//registry.npmjs.org/:_authToken=", "npm_"+g.mixed(36), "\n")
	neg("npm", ".npmrc", "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n")
	ctx("pypi", "pypi_token", "pypi-AgEIcHlwaS5vcmc"+g.s(urlChars, 150))
	pos("pypi", ".pypirc", "[pypi]\nusername = __token__\npassword = ", "pypi-AgEIcHlwaS5vcmc"+g.s(urlChars, 150), "\n")
	neg("pypi", ".pypirc", "[pypi]\nusername = __token__\npassword = pypi-<your-token>\n")
	ctx("atlassian", "jira_api_token", "ATATT3"+g.s(urlChars, 186))
	pos("atlassian", ".env", "CONFLUENCE_API_TOKEN=", g.mixed(24), "\n")
	neg("atlassian", "README.md", "JIRA_API_TOKEN=<api-token>\n")

	// ---- messaging ----
	ctx("slack", "slack_bot_token", "xoxb-"+digits(12)+"-"+digits(13)+"-"+g.mixed(24))
	pos("slack", "bot.py", `client = WebClient(token="`, "xoxb-"+digits(11)+"-"+g.mixed(24), `")`)
	pos("slack", ".env", "SLACK_USER_TOKEN=", "xoxp-"+digits(12)+"-"+digits(12)+"-"+digits(13)+"-"+hex(32), "\n")
	pos("slack", ".env", "SLACK_APP_TOKEN=", "xapp-1-A"+g.s(upperChars+digitChars, 10)+"-"+digits(13)+"-"+hex(64), "\n")
	pos("slack", "legacy.rb", `SLACK = "`, "xoxa-2-"+digits(12)+"-"+digits(12)+"-"+digits(12)+"-"+hex(32), "\"\n")
	pos("slack", "legacy.rb", `SLACK = "`, "xoxs-"+digits(10)+"-"+digits(11)+"-"+digits(12)+"-"+hex(64), "\"\n")
	pos("slack", "legacy.rb", `SLACK = "`, "xoxo-"+digits(10)+"-"+digits(11)+"-"+digits(12)+"-"+hex(32), "\"\n")
	pos("slack", "legacy.rb", `SLACK = "`, "xoxr-"+g.mixed(40), "\"\n")
	pos("slack", "manifest.sh", "export SLACK_CONFIG_TOKEN=", "xoxe.xoxp-1-"+g.s(upperChars+digitChars, 164), "\n")
	pos("slack", "manifest.sh", "export SLACK_CONFIG_REFRESH_TOKEN=", "xoxe-1-"+g.s(upperChars+digitChars, 146), "\n")
	pos("slack", "notify.sh", "curl -X POST -d '{\"text\":\"hi\"}' https://hooks.slack.com/services/", "T"+g.s(upperChars+digitChars, 8)+"/B"+g.s(upperChars+digitChars, 10)+"/"+g.mixed(24), "\n")
	pos("slack", "flow.yaml", "webhook: https://hooks.slack.com/triggers/", "T"+g.s(upperChars+digitChars, 10)+"/"+digits(13)+"/"+hex(32), "\n")
	neg("slack", "README.md", "SLACK_BOT_TOKEN=xoxb-your-bot-token\n")
	neg("slack", "README.md", "SLACK_WEBHOOK=https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX\n")

	pos("discord", "hook.py", "hook = 'https://discord.com/api/webhooks/", digits(18)+"/"+g.s(urlChars, 68), "'\n")
	discordBot := func() string {
		return g.s("MNO", 1) + g.s(alnumChars, 23) + "." + g.s(urlChars, 6) + "." + g.s(urlChars, 38)
	}
	ctx("discord", "discord_bot_token", discordBot())
	pos("discord", ".env", "DISCORD_CLIENT_SECRET=", g.mixed(32), "\n")
	neg("discord", ".env", "DISCORD_CLIENT_ID="+digits(18)+"\n")
	neg("discord", ".env", "DISCORD_TOKEN=your-discord-bot-token\n")

	ctx("telegram", "telegram_bot_token", digits(10)+":AA"+g.s(urlChars, 33))
	pos("telegram", "send.sh", "curl https://api.telegram.org/bot", digits(9)+":AA"+g.s(urlChars, 33), "/sendMessage -d chat_id=1\n")
	neg("telegram", "README.md", "TELEGRAM_BOT_TOKEN=123456789:ABCdefGhIJKlmNoPQRsTUVwxyZ\n")

	pos("twilio", ".env", "TWILIO_ACCOUNT_SID=AC"+hex(32)+"\nTWILIO_API_KEY=", "SK"+hex(32), "\n")
	pos("twilio", "sms.py", "from twilio.rest import Client\nclient = Client('", "SK"+hex(32), "', secret)\n")
	neg("twilio", "sms.py", "from twilio.rest import Client\nclient = Client(os.environ['TWILIO_API_KEY'], os.environ['TWILIO_API_SECRET'])\n")

	ctx("sendgrid", "sendgrid_api_key", "SG."+g.s(urlChars, 22)+"."+g.s(urlChars, 43))
	neg("sendgrid", "README.md", "SENDGRID_API_KEY=SG.xxxxxxxxxxxxxxxxxxxxxx.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n")
	pos("mailgun", ".env", "MAILGUN_API_KEY=", "key-"+hex(32), "\n")
	pos("mailgun", "mail.py", "MAILGUN_API_KEY = '", hex(32)+"-"+hex(8)+"-"+hex(8), "'\n")
	neg("mailgun", "README.md", "MAILGUN_API_KEY=key-"+strings.Repeat("x", 32)+"\n")

	// ---- payments ----
	for _, p := range []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_"} {
		pos("stripe", ".env", "STRIPE_KEY=", p+g.mixed(99), "\n")
	}
	ctx("stripe", "stripe_secret_key", "sk_live_"+g.mixed(24))
	pos("stripe", "charge.sh", "curl https://api.stripe.com/v1/charges -u ", "sk_test_"+g.mixed(24), ": -d amount=2000\n")
	neg("stripe", "docs/quickstart.md", "Stripe.api_key = 'sk_test_"+"4eC39HqLyjWDarjtT1zdp7dc'\n")
	neg("stripe", "index.js", "const stripe = Stripe('pk_live_"+g.mixed(24)+"');\n")
	neg("stripe", "README.md", "STRIPE_SECRET_KEY=sk_test_...\n")
	pos("square", ".env", "SQUARE_ACCESS_TOKEN=", "EAAA"+g.s(urlChars, 60), "\n")
	pos("square", ".env", "SQUARE_SECRET=", "sq0csp-"+g.s(urlChars, 43), "\n")
	neg("square", ".env", "SQUARE_APPLICATION_ID=sq0idp-"+g.s(urlChars, 22)+"\n")
	ctx("shopify", "shopify_access_token", "shpat_"+hex(32))
	pos("shopify", ".env", "SHOPIFY_API_SECRET=", "shpss_"+hex(32), "\n")
	neg("shopify", "README.md", "SHOPIFY_ACCESS_TOKEN=shpat_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n")

	// ---- AI providers ----
	ctx("openai", "openai_api_key", "sk-proj-"+g.s(urlChars, 156))
	pos("openai", "bot.py", `openai.api_key = "`, "sk-"+g.mixed(20)+"T3BlbkFJ"+g.mixed(20), "\"\n")
	neg("openai", ".env.example", "OPENAI_API_KEY=sk-...\n")
	ctx("anthropic", "anthropic_api_key", "sk-ant-api03-"+g.s(urlChars, 93)+"AA")
	pos("anthropic", ".env", "ANTHROPIC_ADMIN_KEY=", "sk-ant-admin01-"+g.s(urlChars, 93)+"AA", "\n")
	neg("anthropic", ".env.example", "ANTHROPIC_API_KEY=sk-ant-api03-...\n")
	ctx("huggingface", "hf_token", "hf_"+g.s(upperChars+lowerChars, 34))
	pos("huggingface", "train.py", "login(token='", "api_org_"+g.s(upperChars+lowerChars, 34), "')\n")
	neg("huggingface", "README.md", "HF_TOKEN=hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n")

	// ---- developer platforms ----
	ctx("adobe", "adobe_client_secret", "p8e-"+g.s(upperChars+lowerChars+digitChars, 32))
	pos("adobe", ".env", "ADOBE_CLIENT_ID=", hex(32), "\n")
	neg("adobe", ".env", "ADOBE_CLIENT_SECRET=<client-secret>\n")
	authress := func() string {
		return "sc_" + g.s(lowerAlnum, 10) + "." + g.s(lowerAlnum, 5) + ".acc_" + g.s(lowerAlnum, 16) + "." + g.s(b64Chars, 60)
	}
	ctx("authress", "authress_access_key", authress())
	neg("authress", "README.md", "AUTHRESS_KEY=sc_<client>.<key>.acc_<account>.<secret>\n")
	doppler := func(p string) string { return "dp." + p + "." + g.s(alnumChars, 43) }
	ctx("doppler", "doppler_token", doppler("pt"))
	pos("doppler", "ci.sh", "doppler run --token ", doppler("st"), " -- ./run\n")
	pos("doppler", "k8s.yaml", "stringData:\n  serviceToken: ", doppler("sa"), "\n")
	neg("doppler", "README.md", "DOPPLER_TOKEN=dp.st.xxxx\n")
	ctx("dynatrace", "dt_api_token", "dt0c01."+g.s(upperChars+digitChars, 24)+"."+g.s(upperChars+digitChars, 64))
	neg("dynatrace", "README.md", "DT_API_TOKEN=dt0c01.ABC123\n")
	harness := func(p string) string {
		return p + "." + g.s(urlChars, 22) + "." + g.s(alnumChars, 24) + "." + g.s(alnumChars, 20)
	}
	ctx("harness", "harness_api_key", harness("pat"))
	pos("harness", "pipeline.yaml", "  apiKey: ", harness("sat"), "\n")
	neg("harness", "README.md", "HARNESS_API_KEY=pat.<account>.<id>.<secret>\n")
	mapbox := func(p string) string {
		return p + "." + b64url(`{"u":"`+g.s(lowerChars, 8)+`","a":"`+g.s(lowerAlnum, 25)+`"}`) + "." + g.s(urlChars, 22)
	}
	ctx("mapbox", "mapbox_access_token", mapbox("sk"))
	pos("mapbox", "map.js", "mapboxgl.accessToken = '", mapbox("pk"), "';\n")
	neg("mapbox", "map.js", "mapboxgl.accessToken = '<your access token here>';\n")
	ctx("notion", "notion_token", "ntn_"+digits(11)+g.mixed(35))
	pos("notion", ".env", "NOTION_API_KEY=", "secret_"+g.mixed(43), "\n")
	neg("notion", "README.md", "NOTION_TOKEN=ntn_****\n")
	pos("nuget", "NuGet.Config", "<configuration>\n  <packageSourceCredentials>\n    <feed>\n      <add key=\"Username\" value=\"ci\" />\n      <add key=\"ClearTextPassword\" value=\"", g.mixed(20), "\" />\n    </feed>\n  </packageSourceCredentials>\n</configuration>\n")
	pos("nuget", "nuget.config", "<packageSourceCredentials><feed><add key=\"Password\" value=\"", g.s(b64Chars, 120)+"==", "\" /></feed></packageSourceCredentials>\n")
	neg("nuget", "nuget.config", "<packageSourceCredentials><feed><add key=\"ClearTextPassword\" value=\"%NUGET_PASSWORD%\" /></feed></packageSourceCredentials>\n")
	pos("sidekiq", ".env", "BUNDLE_ENTERPRISE__CONTRIBSYS__COM=", hex(8)+":"+hex(8), "\n")
	pos("sidekiq", ".bundle/config", "---\nBUNDLE_GEMS__CONTRIBSYS__COM: \"", hex(8)+":"+hex(8), "\"\n")
	pos("sidekiq", "Gemfile", "source \"https://", hex(8)+":"+hex(8), "@gems.contribsys.com/\" do\n  gem 'sidekiq-pro'\nend\n")
	neg("sidekiq", "Gemfile", "source \"https://gems.contribsys.com/\" do\n  gem 'sidekiq-pro'\nend\n")
	ctx("snyk", "snyk_token", uuid())
	neg("snyk", ".env", "SNYK_TOKEN=${SNYK_TOKEN}\n")
	for _, p := range []string{"squ_", "sqp_", "sqa_"} {
		pos("sonarqube", ".env", "SONAR_TOKEN=", p+hex(40), "\n")
	}
	pos("sonarqube", "sonar-project.properties", "sonar.projectKey=app\nsonar.login=", hex(40), "\n")
	pos("sonarqube", "build.sh", "mvn sonar:sonar -Dsonar.token=", "squ_"+hex(40), "\n")
	neg("sonarqube", "sonar-project.properties", "sonar.projectKey=app\nsonar.token=${SONAR_TOKEN}\n")
	ctx("sourcegraph", "src_access_token", "sgp_"+hex(16)+"_"+hex(40))
	pos("sourcegraph", ".env", "SRC_ACCESS_TOKEN=", "sgp_"+hex(40), "\n")
	pos("sourcegraph", ".env", "SRC_ACCESS_TOKEN=", "sgp_local_"+hex(40), "\n")
	neg("sourcegraph", "CHANGELOG.md", "Reverted commit "+hex(40)+" (see the merge base "+hex(40)+").\n")
	neg("sourcegraph", "go.sum", "example.com/mod v1.2.3 h1:"+g.s(b64Chars, 43)+"=\n")
	teams := func() string {
		return "https://" + g.s(lowerChars, 8) + ".webhook.office.com/webhookb2/" + uuid() + "@" + uuid() + "/IncomingWebhook/" + hex(32) + "/" + uuid()
	}
	ctx("teams-webhook", "teams_webhook_url", teams())
	pos("teams-webhook", "notify.ps1", "Invoke-RestMethod -Method Post -Uri '", teams(), "' -Body $json\n")
	neg("teams-webhook", "README.md", "TEAMS_WEBHOOK_URL=https://<tenant>.webhook.office.com/webhookb2/<id>\n")

	// ---- infrastructure ----
	ctx("vault", "vault_token", "hvs."+g.s(urlChars, 90))
	pos("vault", "login.sh", "vault login ", "hvb."+g.s(urlChars, 138), "\n")
	neg("vault", "README.md", "VAULT_TOKEN=hvs.xxxxx\n")
	pos("terraform", ".terraformrc", "credentials \"app.terraform.io\" {\n  token = \"", g.mixed(14)+".atlasv1."+g.s(urlChars, 67), "\"\n}\n")
	pos("terraform", "main.tf", "resource \"azurerm_mssql_server\" \"db\" {\n  administrator_login          = \"sqladmin\"\n  administrator_login_password = \"", g.mixed(12), "\"\n}\n")
	pos("terraform", "variables.tf", "variable \"db_password\" {\n  default = \"x\"\n}\nresource \"aws_db_instance\" \"db\" {\n  password = \"", g.mixed(16), "\"\n}\n")
	neg("terraform", "main.tf", "resource \"aws_db_instance\" \"db\" {\n  password = var.db_password\n}\n")
	neg("terraform", "main.tf", "resource \"random_password\" \"db\" {\n  length = 16\n}\nresource \"aws_db_instance\" \"db\" {\n  password = random_password.db.result\n}\n")
	pos("database-url", ".env", "DATABASE_URL=postgres://app:", g.mixed(20), "@db.internal:5432/app\n")
	pos("database-url", "config.yaml", "mongo:\n  uri: mongodb+srv://svc:", g.mixed(16), "@cluster0.mongodb.net/db\n")
	pos("database-url", "settings.py", "CACHES = {'default': {'LOCATION': 'redis://:", g.mixed(24), "@cache:6379/0'}}\n")
	pos("database-url", "application.properties", "spring.datasource.url=jdbc:mysql://root:", g.mixed(12), "@localhost:3306/app\n")
	neg("database-url", "docker-compose.yml", "environment:\n  DATABASE_URL: postgres://postgres:postgres@db:5432/app\n")
	neg("database-url", ".env", "DATABASE_URL=postgres://${DB_USER}:${DB_PASSWORD}@db:5432/app\n")
	pos("age", "key.txt", "# created: 2024-01-01T00:00:00Z\n# public key: age1"+g.s("qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)+"\n", "AGE-SECRET-KEY-1"+g.s("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58), "\n")
	neg("age", "README.md", "AGE-SECRET-KEY-1XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\n")

	// ---- JWT ----
	jwt := func() string {
		return b64url(`{"alg":"HS256","typ":"JWT"}`) + "." + b64url(`{"sub":"`+digits(10)+`","name":"`+g.s(lowerChars, 8)+`","iat":`+digits(10)+`}`) + "." + g.s(urlChars, 43)
	}
	ctx("jwt", "access_token", jwt())
	pos("jwt", "test.http", "GET /api/me\nAuthorization: Bearer ", jwt(), "\n")
	pos("jwt", "session.txt", "cookie: session=", b64(jwt()), "\n")
	pos("jwt", "k8s/secret.yaml", "apiVersion: v1\nkind: Secret\ndata:\n  token: ", b64(jwt()), "\n")
	neg("jwt", "docs/auth.md", "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."+"eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."+"SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c\n")
	neg("jwt", "docs/auth.md", "Authorization: Bearer <jwt>\n")

	// ---- private keys ----
	pem := func(lines int) string {
		var b strings.Builder
		for i := 0; i < lines; i++ {
			b.WriteString(g.s(b64Chars, 64))
			b.WriteByte('\n')
		}
		return b.String()
	}
	for _, kind := range []string{"RSA ", "", "EC ", "ENCRYPTED ", "DSA "} {
		body := pem(6)
		pos("private-key", "certs/server.key", "-----BEGIN "+kind+"PRIVATE KEY-----\n", body, "-----END "+kind+"PRIVATE KEY-----\n")
	}
	body := pem(6)
	pos("private-key", "id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\n", body, "-----END OPENSSH PRIVATE KEY-----\n")
	body = pem(6)
	pos("private-key", "secring.asc", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n", body, "=abcd\n-----END PGP PRIVATE KEY BLOCK-----\n")
	body = pem(4)
	pos("private-key", "values.yaml", "tls:\n  key: |\n    -----BEGIN PRIVATE KEY-----\n", body, "    -----END PRIVATE KEY-----\n")
	esc := strings.ReplaceAll(pem(8), "\n", `\n`)
	pos("private-key", "service-account.json", "{\n  \"type\": \"service_account\",\n  \"private_key_id\": \""+hex(40)+"\",\n  \"private_key\": \"-----BEGIN PRIVATE KEY-----\\n", esc, "-----END PRIVATE KEY-----\\n\",\n  \"client_email\": \"svc@proj.iam.gserviceaccount.com\"\n}\n")
	neg("private-key", "docs/tls.md", "Paste the key between `-----BEGIN PRIVATE KEY-----` and `-----END PRIVATE KEY-----`.\n")
	neg("private-key", "parse.go", "if strings.HasPrefix(s, \"-----BEGIN RSA PRIVATE KEY-----\") {\n\treturn parseRSA(s)\n}\n")
	neg("private-key", "id_rsa.pub", "ssh-rsa "+g.s(b64Chars, 200)+" me@host\n")

	// ---- PKCS#12 key stores ----
	// DER: SEQUENCE (30 82 len) holding the version 3 (02 01 03), then the
	// authenticated safe (30 82 …).
	der := func(n int) []byte {
		b := []byte{0x30, 0x82, byte(n >> 8), byte(n), 0x02, 0x01, 0x03, 0x30, 0x82}
		for i := 0; i < n; i++ {
			b = append(b, byte(g.r.IntN(256)))
		}
		return b
	}
	keystore := func() string { return base64.StdEncoding.EncodeToString(der(600 + g.r.IntN(600))) }
	pos("pkcs12", "k8s/keystore.yaml", "apiVersion: v1\nkind: Secret\ndata:\n  keystore.p12: ", keystore(), "\n")
	pos("pkcs12", "appsettings.json", `{"Certificate": {"Base64": "`, keystore(), `", "Password": ""}}`)
	pos("pkcs12", "application.properties", "server.ssl.key-store-base64=", keystore(), "\n")
	cert := base64.StdEncoding.EncodeToString(append([]byte{0x30, 0x82, 0x03, 0x10, 0x30, 0x82, 0x02, 0x90, 0xa0, 0x03, 0x02, 0x01, 0x02}, der(400)...))
	neg("pkcs12", "k8s/ca.yaml", "data:\n  ca.crt: "+cert+"\n")
	neg("pkcs12", "docs/p12-files.md", "Convert with openssl pkcs12 -export -out client.p12\n")
	p12 := string(der(300))
	p12 = p12[:12] + "\x00" + p12[13:]
	const binaryGap = "a binary file: skipped before any rule runs, and gitfleet's default rules find no file by its name alone (every default rule must run anchored on keywords)"
	cs = append(cs,
		corpusSample{"pkcs12", "certs/client.p12", p12, "", true, binaryGap},
		corpusSample{"pkcs12", "deploy/signing.pfx", p12, "", true, binaryGap})

	// ---- curl in scripts ----
	pos("curl", "deploy.sh", "curl -s -u deploy:", g.mixed(16), " https://ci.example.com/job/build\n")
	pos("curl", "deploy.sh", "curl --user 'admin:", g.mixed(18), "' https://registry.example.com/v2/\n")
	pos("curl", "api.sh", "curl -X POST \\\n  -H \"Content-Type: application/json\" \\\n  -H \"Authorization: Bearer ", g.mixed(40), "\" \\\n  https://api.example.com/v1/items\n")
	pos("curl", "api.sh", "curl -H 'Authorization: Basic ", b64("svc:"+g.mixed(16)), "' https://api.example.com/\n")
	pos("curl", "api.sh", "curl -H \"X-API-Key: ", g.mixed(32), "\" https://api.example.com/\n")
	pos("curl", "README.md", "```sh\ncurl --header \"Authorization: Token ", hex(40), "\" https://api.example.com/v2/\n```\n")
	neg("curl", "README.md", "curl -u $USER:$PASSWORD https://api.example.com/\n")
	neg("curl", "README.md", "curl -H \"Authorization: Bearer $TOKEN\" https://api.example.com/\n")
	neg("curl", "README.md", "curl -H \"Authorization: Bearer ${API_TOKEN}\" https://api.example.com/\n")
	neg("curl", "README.md", "curl -H 'Authorization: Bearer <token>' https://api.example.com/\n")
	neg("curl", "README.md", "curl -u username:password https://api.example.com/\n")
	neg("curl", "README.md", "curl -H \"Authorization: Bearer YOUR_API_TOKEN\" https://api.example.com/\n")

	// ---- the generic rule: assignment forms of common languages ----
	gp := func(path, before, after string) { pos("generic", path, before, g.mixed(24), after) }
	gp("app.py", `db_password = "`, "\"\n")
	gp(".env", "API_KEY=", "\n")
	gp("config.yaml", "database:\n  password: ", "\n")
	gp("config.toml", "[database]\npassword = \"", "\"\n")
	gp("settings.ini", "[auth]\nclient_secret = ", "\n")
	gp("application.properties", "spring.datasource.password=", "\n")
	gp("main.go", "\tauthToken := \"", "\"\n")
	gp("main.go", "var apiSecret string = \"", "\"\n")
	gp("Makefile", "API_TOKEN ?= ", "\n")
	gp("Makefile", "API_TOKEN ::= ", "\n")
	gp("index.php", "$config['db_password'] = '", "';\n")
	gp("index.php", "$secret .= '", "';\n")
	gp("config.php", "return ['api_key' => '", "'];\n")
	gp("config.rb", "config.secret_key_base = '", "'\n")
	gp("app.js", "const opts = { clientSecret: '", "' };\n")
	gp("app.py", "client = Client(api_key=\"", "\")\n")
	gp("App.cs", "builder.AddSetting(\"ClientSecret\", \"", "\");\n")
	gp("App.java", "ds.setPassword(\"", "\");\n")
	gp("App.java", "private static final String API_TOKEN = \"", "\";\n")
	gp("pom.xml", "<settings><server><id>repo</id><password>", "</password></server></settings>\n")
	gp("config.xml", "<datasource user=\"app\" password=\"", "\" />\n")
	gp("docker-compose.yml", "environment:\n  - POSTGRES_PASSWORD=", "\n")
	gp("deploy.sh", "export SECRET_KEY=\"", "\"\n")
	gp("query.sh", "wget https://api.example.com/v1/data?access_key=", "&format=json\n")
	pos("generic", "config.yaml", "auth:\n  token: ", g.mixed(20)+"."+g.mixed(20), "\n")
	pos("generic", "config.yaml", "auth:\n  secret: ", g.s(b64Chars, 40)+"==", "\n")
	pos("generic", ".env", "SESSION_SECRET=", g.mixed(10)+"/"+g.mixed(10)+"+"+g.mixed(10)+"=", "\n")
	pos("generic", "appsettings.json", "{\"Jwt\": {\"SigningKey\": \"x\", \"ClientSecret\": \"", g.mixed(32), "\"}}\n")
	for _, text := range []string{
		`password = "changeme"`,
		`password = "${DB_PASSWORD}"`,
		`DB_PASSWORD=${DB_PASSWORD:-` + g.mixed(16) + `}`,
		`DB_PASSWORD=${DB_PASSWORD:-changeme}`,
		`token: <token>`,
		`token: <your-api-token>`,
		`secret = "xxxxxxxxxxxxxxxxxxxx"`,
		`api_key = "your_api_key_here"`,
		`api_key = "EXAMPLE` + g.mixed(16) + `"`,
		`token = "1234567890123456"`,
		`password = "aaaaaaaaaaaaaaaa1"`,
		`password = os.Getenv("DB_PASSWORD_1")`,
		`secret = process.env.APP_SECRET_2`,
		`token := getToken(ctx, 12)`,
		`password: "{{ .Values.db.password1 }}"`,
		`password: ********`,
		`secret_name = "prod/app/db-password-2024"`,
		`tokens = tokenizer.tokenize(text1)`,
		`api_key = settings.API_KEY_V2`,
		`password = "%(db_password)s"`,
		`password_hash = bcrypt.hashpw(password1, salt)`,
		`<password>${env.DB_PASSWORD}</password>`,
		`secret_length = 1024`,
		`TokenType: "Bearer"`,
		`token_url: https://oauth.example.com/token`,
		`max_tokens = 4096`,
		`PrivateKey:  testRSA2048PrivateKey,`,
		`config.Certificates[0].PrivateKey = testEd25519PrivateKey`,
		`tokens = 2*maxCompilerConcurrency + minTokens`,
		`"tokenizer": "bert-base-multilingual-cased-v2",`,
		`password: ${{ secrets.DB_PASSWORD_2 }}`,
		`SECRET_KEY = get_random_secret_key(50)`,
		`password=$(openssl rand -base64 32)`,
		`api_key: !vault |`,
		`image_token: sha256:` + hex(64),
		`reset_password_url: /users/password/reset2`,
		`"token_type": "Bearer", "expires_in": 3600`,
		`password = ENC(` + g.mixed(24) + `)`,
	} {
		neg("generic", "app/settings.py", text+"\n")
	}
	return cs
}

// camelCase turns snake_case into camelCase.
func camelCase(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

type familyScore struct {
	trueN, found, specific int // true samples, found, found by a rule of the family
	falseN, fp             int // false samples, those with a finding
	misses, gaps, fps      []string
}

// scoreCorpus scans each sample: a true sample is found when a finding
// overlaps its secret (any finding, for a file found by its path), and a
// false sample is a false positive when anything is found.
func scoreCorpus(s *Scanner, cs []corpusSample) map[string]*familyScore {
	out := map[string]*familyScore{}
	for _, c := range cs {
		fs := out[c.family]
		if fs == nil {
			fs = &familyScore{}
			out[c.family] = fs
		}
		findings := s.Scan(c.path, []byte(c.text), "").Findings
		if !c.isTrue {
			fs.falseN++
			if len(findings) > 0 {
				fs.fp++
				var what []string
				for _, f := range findings {
					what = append(what, fmt.Sprintf("%s %q", f.RuleID, c.text[f.Start:f.End]))
				}
				fs.fps = append(fs.fps, fmt.Sprintf("%s: %q: %s", c.path, c.text, strings.Join(what, ", ")))
			}
			continue
		}
		fs.trueN++
		start := strings.Index(c.text, c.secret)
		end := start + len(c.secret)
		found, specific := false, false
		for _, f := range findings {
			if c.secret != "" && (f.End <= start || f.Start >= end) {
				continue
			}
			found = true
			for _, frag := range corpusFamilies[c.family] {
				specific = specific || strings.Contains(f.RuleID, frag)
			}
		}
		if found {
			fs.found++
		} else if c.gap != "" {
			fs.gaps = append(fs.gaps, fmt.Sprintf("%s: %s", c.path, c.gap))
		} else {
			fs.misses = append(fs.misses, fmt.Sprintf("%s: %q (findings: %v)", c.path, c.text, ruleIDs(findings)))
		}
		if specific {
			fs.specific++
		}
	}
	return out
}

// On this corpus the built-in rules find at least what gitleaks' maintained
// set finds in every family, and flag no false sample it does not: the
// extension only adds.
func TestDefaultRulesCorpus(t *testing.T) {
	cs := defaultCorpus()
	for _, c := range cs {
		if _, ok := corpusFamilies[c.family]; !ok {
			t.Fatalf("sample of unknown family %q", c.family)
		}
		if c.isTrue && c.secret != "" && !strings.Contains(c.text, c.secret) {
			t.Fatalf("%s sample does not hold its secret", c.family)
		}
	}
	ours := scoreCorpus(newTestScanner(t, mustDefault(t)), cs)
	theirs := scoreCorpus(newTestScanner(t, mustLoad(t, string(maintainedTOML))), cs)
	var trueN, found int
	for _, fam := range sortedKeys(ours) {
		x, y := ours[fam], theirs[fam]
		trueN += x.trueN
		found += x.found
		if x.trueN < 1 || x.falseN < 1 {
			t.Errorf("%s: %d true and %d false samples, want at least one of each", fam, x.trueN, x.falseN)
		}
		if x.found < y.found || x.fp > y.fp {
			t.Errorf("%s: built-in rules find %d and flag %d; gitleaks' maintained set alone %d and %d", fam, x.found, x.fp, y.found, y.fp)
		}
	}
	if found == 0 {
		t.Fatal("nothing found: the corpus exercises nothing")
	}
	t.Logf("recall %.1f%% (%d of %d)", 100*float64(found)/float64(trueN), found, trueN)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
