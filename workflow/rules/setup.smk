rule models:
    input:
        config=study_config,
    output:
        f"{RESULTS}/{{study}}/models.json",
    log:
        f"{RESULTS}/{{study}}/logs/models.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=4000,
    shell:
        stage_cmd("models")


rule prompts:
    input:
        config=study_config,
        prompt_files=prompt_files,
    output:
        f"{RESULTS}/{{study}}/prompts.jsonl",
    log:
        f"{RESULTS}/{{study}}/logs/prompts.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=500,
    shell:
        stage_cmd("prompts", f"--manifests {shlex.quote(MANIFESTS)}")


rule provenance:
    input:
        config=study_config,
        models=f"{RESULTS}/{{study}}/models.json",
        prompts=f"{RESULTS}/{{study}}/prompts.jsonl",
    output:
        f"{RESULTS}/{{study}}/provenance.json",
    log:
        f"{RESULTS}/{{study}}/logs/provenance.log",
    conda:
        ENV
    threads: 1
    resources:
        mem_mb=1000,
    shell:
        stage_cmd("provenance")
