package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gitfleet/internal/infra/secrets"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
)

func (a *app) usersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage gitfleet users and their GitHub tokens",
		Long: `A user is a name and a GitHub token. gitfleet caches what each user's token
can see (starter github repos/orgs) and collects organizations on a user's
behalf (starter collect --org). Tokens are stored sealed with
GITFLEET_TOKEN_KEY (AES-GCM); they never appear in workflow inputs or
histories, logs or plain-text columns.`,
	}
	cmd.AddCommand(a.usersAddCmd(), a.usersListCmd(), a.usersRemoveCmd(), a.usersForgetOrgCmd())
	return cmd
}

func (a *app) usersAddCmd() *cobra.Command {
	var tokenEnv string
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user (or replace its token); the token is read from stdin or --token-env",
		Long: `Add reads the user's GitHub token from standard input (or from the
environment variable named by --token-env; never from an argument, which
other users of the machine can see in ps), checks it once with GET /user,
and stores it sealed. Adding an existing name replaces its token.`,
		Example: `  echo "$MY_TOKEN" | starter users add alice
  starter users add alice --token-env ALICE_GITHUB_TOKEN`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			name := in[0]
			if !validUserName(name) {
				return usageError{fmt.Errorf("user name %q: use 1-64 letters, digits, '.', '_' or '-'", name)}
			}
			if a.cfg.TokenBox == nil {
				return usageError{secrets.ErrNoKey}
			}
			token, err := readToken(cmd.InOrStdin(), tokenEnv, a.getenv)
			if err != nil {
				return usageError{err}
			}
			host, err := a.cfg.Hosts.Lookup(a.cfg.Hosts.Default())
			if err != nil {
				return err
			}
			account, err := vcs.NewAccount(host, token, vcs.AccountOptions{})
			if err != nil {
				return err
			}
			login, id, err := account.Whoami(cmd.Context())
			if err != nil {
				return fmt.Errorf("check the token with %s: %w", host.APIURL, err)
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			u, err := st.PutUser(cmd.Context(), store.NewUser{Name: name, APIURL: host.APIURL, Login: login, GitHubID: id,
				TokenSealed: a.cfg.TokenBox.Seal([]byte(token), store.TokenContext(name))})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(u)
			}
			fmt.Fprintf(a.stdout, "user %s: GitHub %s (id %d) on %s\n", u.Name, u.Login, u.GitHubID, u.APIURL)
			return nil
		},
	}
	cmd.Flags().StringVar(&tokenEnv, "token-env", "", "read the token from this environment variable instead of stdin")
	return cmd
}

func validUserName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r)) {
			return false
		}
	}
	return true
}

// readToken takes the token from the named environment variable or the
// first line of stdin.
func readToken(stdin io.Reader, env string, getenv func(string) string) (string, error) {
	if env != "" {
		t := strings.TrimSpace(getenv(env))
		if t == "" {
			return "", fmt.Errorf("the environment variable %s is empty or unset", env)
		}
		return t, nil
	}
	if f, ok := stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprint(os.Stderr, "GitHub token: ")
		}
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	t := strings.TrimSpace(line)
	if t == "" {
		return "", errors.New("no token on standard input (or use --token-env VAR)")
	}
	return t, nil
}

func (a *app) usersListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the users",
		Long: `List shows each user and whether GitHub refused its token (TOKEN: "ok", or
"refused" with when): a refresh that gets GitHub's 401 (a revoked or expired
token) marks it, and later refreshes fail at once without asking GitHub
until "starter users add NAME" replaces the token.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			us, err := st.Users(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(us)
			}
			if len(us) == 0 {
				fmt.Fprintln(a.stdout, "no users (add one with: starter users add NAME)")
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tGITHUB LOGIN\tAPI\tADDED\tTOKEN")
			for _, u := range us {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", u.Name, u.Login, u.APIURL, u.CreatedAt.Format("2006-01-02 15:04"), tokenState(u))
			}
			return w.Flush()
		},
	}
}

// tokenState says whether GitHub refused the user's token (401) and what
// to do then; refreshes do not try a refused token again.
func tokenState(u store.User) string {
	if u.TokenRefusedAt == nil {
		return "ok"
	}
	return fmt.Sprintf("refused %s: run starter users add %s with a new token", u.TokenRefusedAt.UTC().Format("2006-01-02 15:04 UTC"), u.Name)
}

func (a *app) usersRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a user with its token and cached GitHub view",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			ok, err := st.RemoveUser(cmd.Context(), in[0])
			if err != nil {
				return err
			}
			if !ok {
				return usageError{fmt.Errorf("no user %q", in[0])}
			}
			fmt.Fprintf(a.stdout, "user %s removed\n", in[0])
			return nil
		},
	}
}

func (a *app) usersForgetOrgCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "forget-org NAME ORG",
		Short: "Drop an organization asked for by name from a user's cache",
		Long: `An organization asked for with --org that the user is not a member of is
kept in the user's cache and refreshed with it. forget-org drops it (its
repositories, pages and any refusal) and leaves the rest of the cache as it
is; asking for it again fetches it anew.`,
		Example: `  starter users forget-org alice ssoorg`,
		Args:    args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, in []string) error {
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			ok, err := a.cache(st).ForgetOrg(cmd.Context(), in[0], in[1])
			if err != nil {
				return a.cacheError(err)
			}
			if !ok {
				return usageError{fmt.Errorf("user %s's cache holds no organization %s asked for by name", in[0], in[1])}
			}
			fmt.Fprintf(a.stdout, "organization %s dropped from user %s's cache\n", in[1], in[0])
			return nil
		},
	}
}
