rule analyze:
    input:
        [f"{RESULTS}/{{study}}/{f}" for f in analyzed_records()],
    output:
        [f"{RESULTS}/{{study}}/{f}" for f in of_kind("derived")],
    log:
        f"{RESULTS}/{{study}}/logs/analyze.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        f"specproof stage analyze --results {results_arg()} {TEE}"


rule figures:
    input:
        set_records,
        code=package_code,
    output:
        [report(f"{FIGURES}/{{set}}/{name}.png", caption=f"../report/{name}.rst", category="Figures",
                subcategory="{set}") for name in FIGURE_NAMES],
        expand(f"{FIGURES}/{{{{set}}}}/{{name}}.pdf", name=FIGURE_NAMES),
    log:
        f"{FIGURES}/{{set}}/figures.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        records=lambda w: records(w.set),
        out=lambda w: f"{FIGURES}/{w.set}",
    shell:
        "specproof figures --records {params.records:q} --out {params.out:q} > {log:q} 2>&1"


rule machines_figure:
    input:
        lambda w: [f"{records(s)}/micro.parquet" for s in head_machines()],
        code=package_code,
    output:
        f"{FIGURES}/machines/verify_cost_machines.pdf",
        report(f"{FIGURES}/machines/verify_cost_machines.png", caption="../report/verify_cost_machines.rst",
               category="Machines"),
    log:
        f"{FIGURES}/machines/figures.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        sets=head_machines(),
        records=[records(s) for s in head_machines()],
        out=lambda w, output: str(Path(output[0]).parent),
    shell:
        "specproof machines-figure --sets {params.sets:q} --records {params.records:q} --out {params.out:q} > {log:q} 2>&1"


rule break_even_figure:
    input:
        lambda w: [f for s in break_even_sets() for f in record_files(s)],
        code=package_code,
    output:
        f"{FIGURES}/break_even/break_even.pdf",
        report(f"{FIGURES}/break_even/break_even.png", caption="../report/break_even.rst", category="Break-even"),
    log:
        f"{FIGURES}/break_even/figures.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        sets=break_even_sets(),
        records=[records(s) for s in break_even_sets()],
        out=lambda w, output: str(Path(output[0]).parent),
    shell:
        "specproof break-even-figure --sets {params.sets:q} --records {params.records:q} --out {params.out:q} > {log:q} 2>&1"


rule numbers:
    input:
        all_study_records,
        benchmark_tables,
        package_code,
        cited="paper/cited.yaml",
    output:
        f"{PAPER}/build/numbers.json",
    log:
        f"{PAPER}/build/numbers.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=2000,
    params:
        studies=config["studies"],
        head=head_study(),
        title=config.get("paper", {}).get("title", "specproof"),
        replicates="".join(f" --replicate {shlex.quote(e['set'])} {shlex.quote(e['of'])}"
                           for e in config.get("replicates", [])),
        break_even="".join(f" --break-even {shlex.quote(s)}" for s in break_even_sets()),
        manifests=MANIFESTS,
        results=RESULTS,
        benchmarks=BENCHMARKS,
    shell:
        "specproof numbers --studies {params.studies:q} --head {params.head:q} --title {params.title:q}{params.replicates}{params.break_even} "
        "--manifests {params.manifests:q} --results {params.results:q} --benchmarks {params.benchmarks:q} "
        "--cited {input.cited:q} --out {output:q} > {log:q} 2>&1"
