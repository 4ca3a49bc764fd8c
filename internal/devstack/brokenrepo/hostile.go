package brokenrepo

import (
	"os"
	"path/filepath"
	"syscall"

	"gitfleet/internal/devstack/gittest"
)

// Hostile returns the hostile repositories of issue 20, in a fixed order:
// repositories written to exhaust whoever reads them (delta bombs, trees
// nested past any sense, refs and packs that are links out of the
// repository, FIFOs, devices). Each must end as its Case says without a
// worker exhausting its memory, stack or patience: refused with a reason,
// after one attempt — or, when the crafted objects sit beside readable
// ones (issue 31), read around, the rest scanned. They are kept apart from Cases: git itself (fsck,
// repack) would exhaust its memory on the delta bombs. What their links
// lead to is written beside the repository (its name and a suffix), in
// the caller's directory.
func Hostile() []Case {
	return []Case{
		{
			Name:   "delta-bomb-nested",
			Broken: "a pack of 394 bytes: 64 KiB of zeros, a delta of 1 GiB on it, a delta of 64 GiB on that; the tree names the top",
			Want:   Parked, Reason: "over a limit: object size", Commits: -1,
			build: crafted(gittest.NestedDeltas(1<<30, 64<<30)),
		},
		{
			Name:   "delta-bomb-declared-size",
			Broken: "a delta that declares a target of 2^40 bytes (its instructions make 16)",
			Want:   Parked, Reason: "over a limit: object size", Commits: -1,
			build: crafted(gittest.HugeDeclaredSize()),
		},
		{
			Name:   "delta-cycle",
			Broken: "two REF_DELTAs, each the other's base; the tree names one of them",
			Want:   Parked, Reason: "over a limit: delta chain", Commits: -1,
			build: crafted(gittest.DeltaCycle()),
		},
		{
			Name:   "deep-tree",
			Broken: "a tree nested 4,097 levels deep (git's core.maxTreeDepth is 4,096)",
			Want:   Parked, Reason: "over a limit: tree depth", Commits: -1,
			build: crafted(gittest.DeepTree(4097)),
		},
		{
			Name: "one-bad-object-of-each-kind",
			Broken: "one commit holding the nested delta bomb, a delta declaring 2^40 bytes, a delta cycle and a tree " +
				"nested 5,000 deep, beside two files with a secret each (issue 31): each refused object is a lost hole, " +
				"both secrets are found",
			Want: Partial, Reason: "refused object", Findings: 2, Commits: 1,
			build: crafted(gittest.OneOfEach(5000, map[string]string{
				"ci.env": "GITHUB_TOKEN=" + Secret + "\n", "keys.py": "token = \"" + gittest.FakePAT("Br0k2") + "\"\n",
			})),
		},
		{
			Name: "refs-out-of-the-repository",
			Broken: "refs that are a link to /dev/zero, a link to another directory's file, a FIFO and a link to a FIFO " +
				"inside the repository, beside a healthy branch",
			Want: Complete, Reason: "unsafe ref file", Findings: 1, Commits: 2,
			build: func(r *repo) {
				main := healthy(r)
				r.ref("refs/heads/main", main)
				outside := r.dir + ".outside"
				r.fail(os.WriteFile(outside, []byte(main+"\n"), 0o644))
				r.symlink("refs/heads/zero", "/dev/zero")
				r.symlink("refs/heads/outside", outside)
				r.fifo("refs/heads/fifo")
				r.fifo("fifo")
				r.symlink("refs/tags/via-fifo", "../../fifo")
			},
		},
		{
			Name:   "pack-linked-out",
			Broken: "the repository's pack is a link to a file outside it",
			Want:   Parked, Reason: "unsafe repository", Commits: -1,
			build: func(r *repo) {
				r.ref("refs/heads/main", healthy(r))
				r.git(nil, "repack", "-a", "-d", "-q")
				packs := r.packs()
				if r.err != nil || len(packs) != 1 {
					return
				}
				outside := r.dir + ".pack"
				r.fail(os.Rename(packs[0], outside))
				r.fail(os.Symlink(outside, packs[0]))
			},
		},
	}
}

// crafted builds c into the repository, replacing what git init wrote.
func crafted(c *gittest.Crafted) func(r *repo) {
	return func(r *repo) {
		if r.err == nil {
			r.fail(c.WriteRepo(r.dir))
		}
	}
}

// symlink makes rel (under the repository) a symbolic link to target.
func (r *repo) symlink(rel, target string) {
	if r.err != nil {
		return
	}
	p := filepath.Join(r.dir, filepath.FromSlash(rel))
	r.fail(os.MkdirAll(filepath.Dir(p), 0o755))
	r.fail(os.Symlink(target, p))
}

// fifo makes rel (under the repository) a FIFO.
func (r *repo) fifo(rel string) {
	if r.err != nil {
		return
	}
	p := filepath.Join(r.dir, filepath.FromSlash(rel))
	r.fail(os.MkdirAll(filepath.Dir(p), 0o755))
	r.fail(syscall.Mkfifo(p, 0o644))
}
