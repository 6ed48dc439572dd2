from vertexdist.cli.main import run

run()
