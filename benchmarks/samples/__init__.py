"""The sample benchmarks `evalledger demo` judges: data files only, installed with the package."""
