"""regime_map.py's config_period (experiments/lib/regime_runs.py): the period a configuration's schedule model is
run with is its own (dreamddp:h=4 in a cell whose H is 8 is modelled with H = 4; a first run modelled it with the
cell's H and printed a step 41% shorter than the channel's bound). Usage: regime_map_test.py EXPERIMENTS_DIR"""
import sys

sys.path.insert(0, sys.argv[1])
import regime_map  # noqa: E402,F401  (puts experiments/lib on the path)
import regime_runs  # noqa: E402

cases = {"dreamddp:h=4,delay=2": 4, "dreamddp:delay=3,h=16": 16, "localsgd:k=32,outer=nesterov": 32,
         "plsgd:h=2": 2, "dreamddp": 8, "localsgd:delay=2": 8, "ddp": None, "hybrid": None,
         "dreamddp:h=x": None}
# A cell's model spec may hold colons and commas of its own: the ranks and the rate are the last two fields.
cells = {"mlp:2:1gbit": ("mlp", 2, "1gbit"),
         "gpt2:layers=4,d=384,heads=6:2:300mbit": ("gpt2:layers=4,d=384,heads=6", 2, "300mbit"),
         "resnet50:image=64:4:10gbit": ("resnet50:image=64", 4, "10gbit")}
for text, want in cells.items():
    if regime_runs.parse_cell(text) != want:
        print("FAIL: parse_cell(%r) = %r, want %r" % (text, regime_runs.parse_cell(text), want))
        sys.exit(1)
if regime_runs.cell_dirname("gpt2:layers=4,d=384", 2, "1gbit") != "gpt2_layers4_d384-n2-1gbit":
    print("FAIL: cell_dirname keeps a path-hostile character")
    sys.exit(1)
bad = {n: regime_runs.config_period(n) for n, want in cases.items() if regime_runs.config_period(n) != want}
for n, got in bad.items():
    print("FAIL: config_period(%r) = %r, want %r" % (n, got, cases[n]))
print("%d of %d cases as expected" % (len(cases) - len(bad), len(cases)))
sys.exit(1 if bad else 0)
