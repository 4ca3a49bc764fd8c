package workflows

// Internals the external tests (package workflows_test) look at.
const PagesPerRun = pagesPerRun
