from liminal.cli import main

raise SystemExit(main())
