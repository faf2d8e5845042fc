from portal.gpuctl.cli import main

raise SystemExit(main())
