package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"gitfleet/internal/infra/config"
)

func (a *app) adminCmd() *cobra.Command {
	admin := &cobra.Command{
		Use:   "admin",
		Short: "An operator's tasks on the installation itself",
	}
	fk := &cobra.Command{
		Use:   "finding-key",
		Short: "The key of the findings' secret hashes, which the workers are given and the database never holds",
		Long: `The findings' secret hashes are keyed (HMAC-SHA256) so that whoever reads
a dump of the database cannot test guesses of a short secret against them.
The key is therefore not kept in the database: every worker is given it,
in the file GITFLEET_FINDING_KEY_FILE names (or in GITFLEET_FINDING_KEY),
and refuses to start without it. The key has a version ("v2:base64:…"): a
new key gets a new version, and every repository's next scan then hashes
its secrets again under it, in a scope of its own (docs/architecture.md
§11, "The findings' key").`,
	}
	fk.AddCommand(a.findingKeyNewCmd(), a.findingKeyExportCmd(), a.findingKeyForgetCmd())
	admin.AddCommand(fk)
	return admin
}

func (a *app) findingKeyNewCmd() *cobra.Command {
	var out string
	var version int
	cmd := &cobra.Command{
		Use:   "new --out FILE [--version N]",
		Short: "Write a new random finding key to FILE (mode 0600), for a new installation or a rotation",
		Long: `new writes a new random key of 32 bytes, with its version, to FILE (created
with mode 0600; an existing file is left alone). Give it to every worker
(GITFLEET_FINDING_KEY_FILE=FILE) and restart them together. To rotate, write
the next version (--version 2 after 1) and restart the workers with it:
each repository's next scan hashes its secrets again under the new key, and
the results under the old one go with the retention of old scopes
(GITFLEET_RETAIN_OLD_SCOPES).`,
		Example: `  starter admin finding-key new --out /etc/gitfleet/finding.key
  starter admin finding-key new --version 2 --out /etc/gitfleet/finding.key.v2`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" || version < 1 {
				return usageError{errors.New("want --out FILE and a --version from 1")}
			}
			k := config.NewFindingKey(version)
			if err := writeKeyFile(out, k); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote %s to %s\ngive it to every worker (%s=%s) and restart them together\n",
				k, out, config.EnvHashKeyFile, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the file to write the key to (must not exist)")
	cmd.Flags().IntVar(&version, "version", 1, "the key's version: one more than the key it replaces")
	return cmd
}

func (a *app) findingKeyExportCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export --out FILE",
		Short: "Write the finding key an earlier release kept in the database to FILE, for the workers",
		Long: `Releases before key versions generated the findings' key once and kept it in
the database, beside the hashes it keys. export writes that key to FILE
(mode 0600) as version 1, so that the workers, given the file, hash as
before: nothing is scanned again. Then take it out of the database with
'starter admin finding-key forget'.

If the database may have been copied while it held the key, rotate
instead: 'starter admin finding-key new --version 2', then forget with
--discard; every repository is then scanned again under the new key.`,
		Example: `  starter admin finding-key export --out /etc/gitfleet/finding.key`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{errors.New("want --out FILE")}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			key, ok, err := st.LegacyFindingKey(cmd.Context())
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("the database holds no finding key: nothing to export " +
					"(a new installation makes one with 'starter admin finding-key new')")
			}
			k := config.FindingKey{Version: 1, Secret: key}
			if err := writeKeyFile(out, k); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "wrote the database's %s to %s\n"+
				"give it to every worker (%s=%s), then: starter admin finding-key forget --key-file %s\n",
				k, out, config.EnvHashKeyFile, out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the file to write the key to (must not exist)")
	return cmd
}

func (a *app) findingKeyForgetCmd() *cobra.Command {
	var keyFile string
	var discard bool
	cmd := &cobra.Command{
		Use:   "forget [--key-file FILE | --discard]",
		Short: "Delete the finding key an earlier release kept in the database",
		Long: `forget deletes the findings' key an earlier release kept in the database,
once it is exported: only if it is the key in --key-file (default: the one
GITFLEET_FINDING_KEY_FILE or GITFLEET_FINDING_KEY gives), so that a key
nobody exported is not lost by mistake. With --discard it deletes it
whatever it is: after a rotation, which needs the old key no more.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var secret []byte
			if !discard {
				k, err := a.cfg.FindingKey()
				if keyFile != "" {
					k, err = config.ReadFindingKeyFile(keyFile)
				}
				if err != nil {
					return usageError{fmt.Errorf("the key to compare with (--key-file, or --discard): %w", err)}
				}
				secret = k.Secret
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			key, ok, err := st.LegacyFindingKey(cmd.Context())
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintln(a.stdout, "the database holds no finding key")
				return nil
			}
			if discard {
				secret = key
			}
			gone, err := st.ForgetLegacyFindingKey(cmd.Context(), secret)
			if err != nil {
				return err
			}
			if !gone {
				return errors.New("the database's finding key is not the one given: export it first " +
					"('starter admin finding-key export'), or --discard it after a rotation")
			}
			fmt.Fprintln(a.stdout, "the database no longer holds a finding key")
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key-file", "", "the exported key file (default: the configured one)")
	cmd.Flags().BoolVar(&discard, "discard", false, "delete it even if it was not exported (after a rotation)")
	cmd.MarkFlagsMutuallyExclusive("key-file", "discard")
	return cmd
}

// writeKeyFile writes k to a new file only its owner reads, synced before
// it says so: the key is in no other place once the database forgets it.
func writeKeyFile(path string, k config.FindingKey) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(k.Format() + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
