from gpuctl.cli import main

raise SystemExit(main())
